"""JsonConverter and Struct cost per call, in microseconds: the per-record CPU a Connect task
spends turning bytes into Connect data and back (issue 27's JDBC and FileStream paths).

Cases: the JDBC benchmark's order envelope (a 5-field struct with Decimal and Timestamp) and a
10-field struct, a plain string, a schemaless map; each with ``schemas.enable`` true and false.
Prints one table; each figure is the best of ``--repeat`` runs of ``--calls`` calls, in CPU time
(this process's), so that other jobs on the machine do not count.

    python benchmarks/connect_converter_bench.py
    python benchmarks/connect_converter_bench.py --calls 20000 --repeat 5
"""

from __future__ import annotations

import argparse
import datetime as dt
import decimal
import time
from collections.abc import Callable
from typing import Any

from odradek.connect.converters.json_converter import JsonConverter
from odradek.connect.data import Decimal, Schema, SchemaBuilder, Struct, Timestamp

ORDER = (
    SchemaBuilder.struct()
    .name("order")
    .field("id", Schema.INT64_SCHEMA)
    .field("customer", Schema.STRING_SCHEMA)
    .field("amount", Decimal.schema(2))
    .field("quantity", Schema.INT32_SCHEMA)
    .field("placed", Timestamp.SCHEMA)
    .build()
)
WIDE = (
    SchemaBuilder.struct()
    .name("wide")
    .field("id", Schema.INT64_SCHEMA)
    .field("name", Schema.STRING_SCHEMA)
    .field("email", Schema.OPTIONAL_STRING_SCHEMA)
    .field("age", Schema.INT32_SCHEMA)
    .field("score", Schema.FLOAT64_SCHEMA)
    .field("active", Schema.BOOLEAN_SCHEMA)
    .field("tags", SchemaBuilder.array(Schema.STRING_SCHEMA).optional().build())
    .field("level", Schema.INT16_SCHEMA)
    .field("note", Schema.OPTIONAL_STRING_SCHEMA)
    .field("created", Timestamp.SCHEMA)
    .build()
)
MOMENT = dt.datetime(2024, 1, 1, 12, 30, tzinfo=dt.UTC)


def order(i: int = 7) -> Struct:
    return (
        Struct(ORDER).put("id", i).put("customer", f"customer-{i}").put("amount", decimal.Decimal("12.34"))
        .put("quantity", 3).put("placed", MOMENT)
    )


def wide(i: int = 7) -> Struct:
    return (
        Struct(WIDE).put("id", i).put("name", "Ada Lovelace").put("email", "ada@example.com").put("age", 36)
        .put("score", 98.5).put("active", True).put("tags", ["math", "engines"]).put("level", 3)
        .put("created", MOMENT)
    )


MAP = {"id": 7, "name": "Ada", "score": 98.5, "tags": ["a", "b"], "nested": {"x": 1, "y": None}}


def converter(schemas: bool) -> JsonConverter:
    c = JsonConverter()
    c.configure({"schemas.enable": str(schemas).lower()}, is_key=False)
    return c


def per_call(fn: Callable[[], Any], calls: int, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        for _ in range(calls):
            fn()
        best = min(best, time.process_time() - start)
    return best / calls * 1e6


def cases() -> list[tuple[str, Callable[[], Any]]]:
    out: list[tuple[str, Callable[[], Any]]] = []
    for schemas in (True, False):
        tag = "schemas" if schemas else "no-schemas"
        c = converter(schemas)
        for label, schema, value in (
            ("order struct", ORDER, order()),
            ("10-field struct", WIDE, wide()),
            ("string", Schema.STRING_SCHEMA, "hello, world"),
            ("schemaless map", None, MAP),
        ):
            data = c.from_connect_data("t", schema, value)
            out.append((f"to_connect_data  {label} ({tag})", lambda c=c, d=data: c.to_connect_data("t", d)))
            out.append((
                f"from_connect_data {label} ({tag})",
                lambda c=c, s=schema, v=value: c.from_connect_data("t", s, v),
            ))
    built = order()
    customer = ORDER.field("customer")
    out += [
        ("Struct build + 5 puts (order)", order),
        ("Struct.get by name", lambda: built.get("customer")),
        ("Struct.get by Field", lambda: built.get(customer)),
        ("Struct.validate (order)", built.validate),
    ]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=5000, help="calls per timed run (default 5000)")
    parser.add_argument("--repeat", type=int, default=5, help="timed runs per case; the best counts (default 5)")
    args = parser.parse_args()
    print(f"{'case':<48} {'CPU µs/call':>11}")
    for label, fn in cases():
        print(f"{label:<48} {per_call(fn, args.calls, args.repeat):>11.2f}")


if __name__ == "__main__":
    main()
