"""The Kafka error classes: the ones made from kio's codes and the list the type checker reads."""

import ast
import inspect

from odradek.protocol import errors


def _declared_for_type_checker() -> list[str]:
    tree = ast.parse(inspect.getsource(errors))
    blocks = [
        node
        for node in tree.body
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"
    ]
    assert len(blocks) == 1, "errors.py should declare its classes in one `if TYPE_CHECKING:` block"
    return [node.name for node in blocks[0].body if isinstance(node, ast.ClassDef)]


def test_type_checker_declarations_match_the_error_classes():
    made = [cls.__name__ for cls in errors._BY_CODE.values()]
    declared = _declared_for_type_checker()
    assert sorted(declared) == sorted(made), (
        f"declared but not made: {sorted(set(declared) - set(made))}; "
        f"made but not declared: {sorted(set(made) - set(declared))}"
    )


def test_error_for_finds_each_class_by_its_code():
    for name in _declared_for_type_checker():
        cls = getattr(errors, name)
        assert issubclass(cls, errors.KafkaError)
        assert errors.error_for(int(cls.code)) is cls
    assert errors.error_for(10_000) is errors.UnknownServerErrorError
