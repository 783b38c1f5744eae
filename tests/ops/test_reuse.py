"""What a report computed last time is taken again only for the same inputs and code, exactly as computed."""
import gzip
import importlib.util
import json
import math

import numpy as np
import pytest

from attrbench.ops import reuse as reuse_module
from attrbench.ops.reuse import FILE, Reuse, _decode, _encode, digest_of, reused, reusing
from attrbench.ops.verdicts import against_floor, bayes_signed_rank, pairwise

CALLS = []


@reused
def _square_all(values, scale: float = 1.0):
    CALLS.append(values)
    return {"squares": tuple(None if v is None else v * v * scale for v in values), "n": len(values)}


def test_a_kept_result_is_exactly_what_was_returned():
    value = {"t": (1, 2.5, None), "ints": {3: "x", (1, 2): [True, False]}, "array": np.arange(6.0).reshape(2, 3),
             "odd": [math.inf, -math.inf, -0.0, 1e-310, 0.1 + 0.2], "flag": np.bool_(True), "count": np.int64(7)}
    back = _decode(json.loads(json.dumps(_encode(value), allow_nan=False)))
    assert back["t"] == (1, 2.5, None) and isinstance(back["t"], tuple)
    assert back["ints"] == {3: "x", (1, 2): [True, False]}
    assert back["array"].dtype == np.float64 and np.array_equal(back["array"], value["array"])
    assert [math.copysign(1, v) if v == 0 else v for v in back["odd"]] == [math.inf, -math.inf, -1.0, 1e-310,
                                                                         0.1 + 0.2]
    assert back["flag"] is True and back["count"] == 7


def test_the_same_inputs_are_computed_once_and_other_inputs_again(tmp_path):
    CALLS.clear()
    data = [0.5, None, 2.0] * 4
    assert _square_all(data) == _square_all(data) and len(CALLS) == 2  # outside a block: computed each time
    with reusing(tmp_path) as first:
        a = _square_all(data)
        assert _square_all(list(data)) == a and first.computed == 1 and first.reused == 1
    with reusing(tmp_path) as second:
        assert _square_all(data) == a and isinstance(_square_all(data)["squares"], tuple)
        assert second.computed == 0
        _square_all(data, scale=2.0)  # another argument
        _square_all(data[:-1] + [2.5])  # another value
        assert second.computed == 2
    assert len(CALLS) == 2 + 1 + 2


def test_the_file_is_the_same_bytes_whatever_the_order_and_holds_only_what_was_used(tmp_path):
    CALLS.clear()
    inputs = [[float(i), float(i + 1)] * 5 for i in range(4)]
    for folder, order in ((tmp_path / "a", inputs), (tmp_path / "b", inputs[::-1])):
        with reusing(folder):
            for values in order:
                _square_all(values)
    assert (tmp_path / "a" / FILE).read_bytes() == (tmp_path / "b" / FILE).read_bytes()
    with reusing(tmp_path / "a"):
        _square_all(inputs[0])
    with gzip.open(tmp_path / "a" / FILE, "rt") as f:
        assert len(json.load(f)["results"]) == 1


def test_a_file_of_other_library_versions_or_damaged_is_not_used(tmp_path, monkeypatch):
    data = [1.0, 2.0] * 5
    with reusing(tmp_path):
        _square_all(data)
    here = reuse_module._versions()
    monkeypatch.setattr(reuse_module, "_versions", lambda: here.replace("pandas=", "pandas=0.0.1+"))
    other = Reuse(tmp_path)  # and says which library differs, for the line a report prints
    assert other.known == {} and other.unused.startswith("pandas ") and "(0.0.1+" in other.unused
    assert other.unused.count("here)") == 1
    monkeypatch.undo()
    assert Reuse(tmp_path).known and Reuse(tmp_path).unused is None
    (tmp_path / FILE).write_bytes(b"not gzip")
    assert Reuse(tmp_path).known == {}


def test_digests_tell_apart_what_differs_and_sets_do_not_depend_on_their_order():
    assert digest_of([1.0, None]) != digest_of([None, 1.0]) != digest_of([1.0, 0.0])
    assert digest_of({"a": 1}) != digest_of({"a": 1.0})
    assert digest_of({"b", "a", "c"}) == digest_of({"c", "b", "a"})
    assert digest_of({(1, 2): 3}) != digest_of({(1, 3): 3})  # a mapping JSON cannot write is digested value by value
    with pytest.raises(TypeError):
        digest_of(object())


def test_verdicts_from_kept_pair_tests_equal_those_computed(tmp_path):
    rng = np.random.default_rng(3)
    values = {f"m{i}": [None if rng.random() < 0.1 else float(v) for v in rng.normal(i * 0.1, 1, 40)]
              for i in range(5)}
    floor = [float(v) for v in rng.normal(0, 1, 40)]
    plain = (pairwise(values, True), against_floor(values, floor, True), bayes_signed_rank(np.array(floor[:20])))
    for _ in range(2):
        with reusing(tmp_path) as kept:
            again = (pairwise(values, True), against_floor(values, floor, True),
                     bayes_signed_rank(np.array(floor[:20])))
        assert json.dumps(again, default=float) == json.dumps(plain, default=float)
    assert kept.computed == 0 and kept.reused == 10 + 5 + 1
    with reusing(tmp_path) as changed:  # one method's scores changed: its 4 pairs and its floor test again
        pairwise({**values, "m2": [v if v is None else v + 0.01 for v in values["m2"]]}, True)
    assert changed.computed == 4 and changed.reused == 6


def test_a_digest_is_of_the_data_not_of_how_it_is_held():
    """Equal data gives one digest however its objects are shared (a row read twice, or one list held by two
    rows); a float's last bit, a type (1 against 1.0, a tuple against a list), a key's order or a value moved
    changes it; data marshal does not take (numpy values, arrays, sets) is digested as JSON."""
    shared = [0.1, None, 2.5]
    once = {"values": shared, "other": shared, "name": "alti"}
    apart = {"values": [0.1, None, 2.5], "other": [0.1, None, 2.5], "name": "".join(["al", "ti"])}
    assert digest_of(once) == digest_of(apart)
    others = [{"values": [0.1, None, math.nextafter(2.5, 3)], "other": [0.1, None, 2.5], "name": "alti"},
              {"values": [0.1, None, 2.5], "other": (0.1, None, 2.5), "name": "alti"},
              {"other": [0.1, None, 2.5], "values": [0.1, None, 2.5], "name": "alti"},
              {"values": [0.1, None, 2.5], "other": [0.1, 2.5, None], "name": "alti"},
              {"values": [0.1, None, 2], "other": [0.1, None, 2.5], "name": "alti"}]
    assert len({digest_of(once), *map(digest_of, others)}) == 1 + len(others)
    assert digest_of(np.float64(0.5)) == digest_of(np.float64(0.5)) != digest_of(np.float64(0.25))
    assert digest_of(np.arange(3.0)) != digest_of(np.arange(3))
    assert digest_of({(1, 2): 3}) != digest_of({(1, 2): 4})


def test_rewording_a_docstring_or_comment_keeps_the_key_and_changing_code_does_not(tmp_path):
    """The key of a result digests the code of its module (``source_digest``) without its docstrings and comments:
    a reworded docstring keeps what the published reports computed; any change to what runs, a string it uses
    included, is a new key."""
    from attrbench.ops.reuse import code_of, source_digest

    source = '''"""A module."""
import math  # why


def f(x):  # é
    """What f does,
    on two lines."""
    return math.sqrt(x) + len("# not a comment")  # and why


class A:
    """A's doc."""
    y = 1
'''
    reworded = (source.replace("What f does", "What f computes").replace("# why", "# because")
                .replace("A's doc.", "Another doc.").replace("\n\n\nclass", "\n\nclass"))
    code = ['import math', 'def f(x):', '    return math.sqrt(x) + len("# not a comment")', 'class A:', '    y = 1']
    assert code_of(source.encode()).splitlines() == code == code_of(reworded.encode()).splitlines()
    for changed in (source.replace("+ len", "- len"), source.replace("not a comment", "not one"),
                    source.replace("y = 1", "y = 2")):
        assert code_of(changed.encode()) != code_of(source.encode())
    assert code_of("x = 'caf\xe9'  # \xe9\n".encode("latin-1")) == "x = 'caf\xe9'  # \xe9\n"  # not UTF-8: whole
    digests = []
    for name, text in (("m1", source), ("m2", reworded), ("m3", source.replace("y = 1", "y = 2"))):
        (tmp_path / f"{name}.py").write_text(text)
        spec = importlib.util.spec_from_file_location(name, tmp_path / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        digests.append(source_digest(module))
    assert digests[0] == digests[1] != digests[2]
