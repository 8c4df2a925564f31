"""The SMTs and predicates by Kafka's class names (``$Key``/``$Value`` variants included).

Read through ``odradek.connect.transforms.TRANSFORMATIONS`` and ``PREDICATES``.
"""

from odradek.connect.transforms.cast import Cast
from odradek.connect.transforms.field_transforms import (
    ExtractField,
    HoistField,
    InsertField,
    MaskField,
    ReplaceField,
    ValueToKey,
)
from odradek.connect.transforms.flatten import Flatten
from odradek.connect.transforms.header_transforms import DropHeaders, HeaderFrom, InsertHeader
from odradek.connect.transforms.predicates import HasHeaderKey, RecordIsTombstone, TopicNameMatches
from odradek.connect.transforms.routing_transforms import (
    Filter,
    RegexRouter,
    SetSchemaMetadata,
    TimestampRouter,
)
from odradek.connect.transforms.timestamp_converter import TimestampConverter
from odradek.connect.transforms.transformation_base import key_and_value_variants

_T = "org.apache.kafka.connect.transforms."

TRANSFORMATIONS: dict[str, type] = {
    **key_and_value_variants(InsertField, _T + "InsertField"),
    **key_and_value_variants(ReplaceField, _T + "ReplaceField"),
    **key_and_value_variants(MaskField, _T + "MaskField"),
    **key_and_value_variants(ExtractField, _T + "ExtractField"),
    **key_and_value_variants(HoistField, _T + "HoistField"),
    **key_and_value_variants(Cast, _T + "Cast"),
    **key_and_value_variants(Flatten, _T + "Flatten"),
    **key_and_value_variants(TimestampConverter, _T + "TimestampConverter"),
    **key_and_value_variants(SetSchemaMetadata, _T + "SetSchemaMetadata"),
    **key_and_value_variants(HeaderFrom, _T + "HeaderFrom"),
    _T + "ValueToKey": ValueToKey,
    _T + "TimestampRouter": TimestampRouter,
    _T + "RegexRouter": RegexRouter,
    _T + "Filter": Filter,
    _T + "DropHeaders": DropHeaders,
    _T + "InsertHeader": InsertHeader,
}

PREDICATES: dict[str, type] = {
    _T + "predicates.TopicNameMatches": TopicNameMatches,
    _T + "predicates.HasHeaderKey": HasHeaderKey,
    _T + "predicates.RecordIsTombstone": RecordIsTombstone,
}

# Kafka's class name of each transformation and predicate class.
KAFKA_NAMES: dict[type, str] = {cls: name for name, cls in {**TRANSFORMATIONS, **PREDICATES}.items()}
