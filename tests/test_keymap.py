import pytest

from playtester.errors import UserError
from playtester.capture.keymap import KeyMap, load_keymap, normalise_key


def test_default_map_is_the_papers_nine_actions():
    km = KeyMap.default()
    assert km.n == 9
    assert [a.keys for a in km.actions] == [
        ("w",), ("a",), ("s",), ("d",), ("left",), ("right",), ("up",), ("down",), ("space",),
    ]
    assert km.keys == frozenset({"w", "a", "s", "d", "left", "right", "up", "down", "space"})


def test_yaml_round_trip_and_aliases(tmp_path):
    path = tmp_path / "map.yaml"
    path.write_text("name: mine\nactions:\n  - {name: go, keys: [W]}\n  - {name: run, keys: [Shift_L, w]}\n  - {name: look, keys: Arrow_Left}\n")
    km = KeyMap.load(path)
    assert km.names == ["go", "run", "look"]
    assert km.actions[1].keys == ("shift", "w")
    assert km.actions[2].keys == ("left",)
    assert KeyMap.from_dict(km.to_dict()) == km
    assert km.fingerprint == KeyMap.from_dict(km.to_dict()).fingerprint
    assert km.fingerprint != KeyMap.default().fingerprint


def test_unknown_key_names_the_action_and_the_file(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("name: bad\nactions:\n  - {name: fly, keys: [hyperdrive]}\n")
    with pytest.raises(UserError) as e:
        KeyMap.load(path)
    assert "bad.yaml" in str(e.value) and "'fly'" in str(e.value) and "hyperdrive" in str(e.value)


@pytest.mark.parametrize("keys", [["alt", "f4"], ["super"], ["ctrl", "alt", "t"], ["esc"], ["alt", "tab"], ["ctrl", "q"],
                                  ["ctrl", "w"]])
def test_system_combinations_are_refused_unless_allowed(keys):
    data = {"name": "x", "actions": [{"name": "danger", "keys": keys}]}
    with pytest.raises(UserError, match="allow_system_keys"):
        KeyMap.from_dict(data)
    assert KeyMap.from_dict({**data, "allow_system_keys": True}).n == 1


@pytest.mark.parametrize("written", ['"no"', '"false"', "'true'", "0", "yes please"])
def test_allow_system_keys_is_a_yaml_boolean_not_a_string(tmp_path, written):
    path = tmp_path / "keys.yaml"
    path.write_text(f"name: x\nallow_system_keys: {written}\nactions:\n  - {{name: close, keys: [alt, f4]}}\n")
    with pytest.raises(UserError, match="allow_system_keys .*true or false"):
        KeyMap.load(path)
    path.write_text("name: x\nallow_system_keys: no\nactions:\n  - {name: close, keys: [alt, f4]}\n")
    with pytest.raises(UserError, match="Alt\\+F4"):  # YAML's bare no is false: refused as a system key
        KeyMap.load(path)


def test_harmless_modifiers_are_allowed():
    assert KeyMap.from_dict({"name": "x", "actions": [{"name": "crouch", "keys": ["ctrl", "c"]}]}).n == 1


def test_action_for_keys_rule():
    km = KeyMap.from_dict({"name": "x", "actions": [
        {"name": "fwd", "keys": ["w"]}, {"name": "left", "keys": ["a"]},
        {"name": "jump_fwd", "keys": ["w", "space"]}, {"name": "jump", "keys": ["space"]},
    ]})
    assert km.action_for_keys([]) is None
    assert km.action_for_keys(["q"]) is None
    assert km.action_for_keys(["w"]) == 0
    # the combination with the most keys wins over its parts
    assert km.action_for_keys(["w", "space"]) == 2
    assert km.action_for_keys(["space", "w"]) == 2
    # a tie of single keys goes to the key pressed last
    assert km.action_for_keys(["w", "a"]) == 1
    assert km.action_for_keys(["a", "w"]) == 0


def test_load_keymap_default_and_missing_file(tmp_path):
    assert load_keymap(None) == KeyMap.default() == load_keymap("default")
    with pytest.raises(UserError, match="not found"):
        load_keymap(tmp_path / "nope.yaml")
    assert normalise_key("Escape") == "esc"


def test_repeated_action_names_are_refused():
    with pytest.raises(UserError, match="repeat"):
        KeyMap.from_dict({"name": "x", "actions": [{"name": "a", "keys": ["w"]}, {"name": "a", "keys": ["s"]}]})
