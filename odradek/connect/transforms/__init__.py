"""Single message transforms and predicates under Kafka's class names.

``TRANSFORMATIONS`` and ``PREDICATES`` map each Kafka class name (``$Key``/``$Value`` variants
included) to its Python class; ``TransformationChain.from_config`` builds a connector's chain from
its ``transforms``/``predicates`` keys, ``validate_transforms`` lists what is wrong with them.
"""

from odradek.connect.transforms.smt_catalog import KAFKA_NAMES, PREDICATES, TRANSFORMATIONS
from odradek.connect.transforms.transformation_base import Predicate, Transformation
from odradek.connect.transforms.transformation_chain import Stage, TransformationChain, validate_transforms

__all__ = [
    "KAFKA_NAMES",
    "PREDICATES",
    "TRANSFORMATIONS",
    "Predicate",
    "Stage",
    "Transformation",
    "TransformationChain",
    "validate_transforms",
]
