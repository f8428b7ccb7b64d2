"""Levels a user names by file: a WAD (`doom:wad:PATH[:MAP][:iwad=IWAD]`) or one of ViZDoom's
shipped scenarios (`doom:scenario:NAME`).

A PWAD plays over an IWAD, the base game whose textures and things it uses: Freedoom 2 by
default (Freedoom 1 for a map named ExMy), or the one `iwad=` names (`freedoom1`, `freedoom2`,
or a path). An IWAD given as the file plays alone. Without `:MAP` the WAD's first map plays; a
map the PWAD lacks is looked for in its IWAD, as the engine does.

Everything is checked before the engine starts, so that bad input is one line naming the file,
the map or the option and what to do: a file that is not a whole WAD, a map neither WAD has, a
map without a player start, an IWAD that is missing or is not an IWAD, an unknown scenario.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from playtester.errors import UserError
from playtester.capture.level_map import lumps_of, map_lumps, map_names, wad_kind

SHIPPED_IWADS = ("freedoom2", "freedoom1")
WAD_USAGE = "doom:wad:PATH[:MAP][:iwad=freedoom1|freedoom2|PATH]"
_MAP_NAME = re.compile(r"[A-Za-z0-9_]{1,8}")


def vizdoom_folder() -> Path:
    import vizdoom

    return Path(os.path.dirname(vizdoom.__file__))


def wad_maps(path: str | Path) -> list[str]:
    """The maps a WAD holds, in order (a `UserError` when it is no WAD)."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path}: no such WAD file")
    return map_names(lumps_of(path))


def parse_wad_spec(spec: str) -> tuple[Path, str | None, str | None]:
    """`(path, map or None, iwad option or None)` of a `doom:wad:…` spec. The path may hold colons:
    the longest leading part that names a file is the path."""
    rest = spec[len("doom:wad:"):]
    if not rest:
        raise UserError(f"game {spec!r}: name the WAD file, e.g. doom:wad:mylevel.wad:MAP01")
    parts = rest.split(":")
    iwad = None
    while parts and "=" in parts[-1]:
        key, _, value = parts.pop().partition("=")
        if key != "iwad" or not value:
            raise UserError(f"game {spec!r}: unknown option {key + '=' + value!r}; the one option is iwad=freedoom1|freedoom2|PATH")
        iwad = value
    for cut in range(len(parts), 0, -1):
        path = Path(":".join(parts[:cut]))
        if path.is_file() and len(parts) - cut <= 1:
            return path, (parts[cut].upper() if cut < len(parts) and parts[cut] else None), iwad
    path = Path(":".join(parts[:-1]) if len(parts) > 1 and _MAP_NAME.fullmatch(parts[-1]) else ":".join(parts))
    if path.is_dir():
        raise UserError(f"game {spec!r}: {path} is a folder; give the path of a .wad file")
    raise UserError(f"game {spec!r}: no such WAD file {path}; give the path of a Doom IWAD or PWAD ({WAD_USAGE})")


def resolve_iwad(option: str | None, level: str | None, spec: str) -> Path:
    """The IWAD a PWAD plays over: `option` (a shipped name or a path), else Freedoom 1 for an
    ExMy map and Freedoom 2 otherwise; refused when it is missing or not an IWAD."""
    from playtester.capture.doom import iwad_path

    if option is None:
        option = "freedoom1" if level and re.fullmatch(r"E\dM\d", level) else "freedoom2"
    path = iwad_path(option) if option in SHIPPED_IWADS else Path(option)
    if not path.is_file():
        raise UserError(f"game {spec!r}: the IWAD {option} is missing ({path}); give iwad=freedoom1, iwad=freedoom2 "
                        "or the path of the IWAD this PWAD was made for")
    if wad_kind(path) != "IWAD":
        raise UserError(f"game {spec!r}: iwad={option} is a PWAD, not an IWAD (a base game); give iwad=freedoom2 or the "
                        "path of an IWAD")
    return path


def check_player_start(wad: Path, level: str, spec: str) -> None:
    """Refuse a map with no player start (a thing of type 1): the engine could not place the player."""
    from playtester.capture.level_map import read_level

    things = read_level([wad], level).things
    if not any(t.type == 1 for t in things):
        raise UserError(f"game {spec!r}: map {level} of {wad} has no player start (a thing of type 1, placed for skill 3 "
                        "in single player); add one in the map editor")


def wad_scenario(spec: str):
    """The `DoomScenario` of a `doom:wad:PATH[:MAP][:iwad=…]` spec, checked."""
    from playtester.capture.doom import DoomScenario

    path, level, iwad_option = parse_wad_spec(spec)
    kind = wad_kind(path)
    maps = map_names(lumps_of(path))
    if kind == "IWAD":
        if iwad_option is not None:
            raise UserError(f"game {spec!r}: {path} is an IWAD itself; leave out iwad=")
        level = level or (maps[0] if maps else None)
        if level is None or level not in maps:
            raise UserError(f"game {spec!r}: {path} has no map {level or ''}".rstrip() + f"; its maps: {', '.join(maps) or 'none'}")
        check_player_start(path, level, spec)
        return DoomScenario(spec=spec, iwad=path, map=level, level=True)
    if level is None and not maps:
        raise UserError(f"game {spec!r}: {path} holds no map; name one of its IWAD's maps, e.g. {spec}:MAP01")
    level = level or maps[0]
    iwad = resolve_iwad(iwad_option, level, spec)
    if level in maps:
        check_player_start(path, level, spec)
    elif map_lumps(lumps_of(iwad), level) is None:
        raise UserError(f"game {spec!r}: map {level} is neither in {path} (its maps: {', '.join(maps) or 'none'}) nor in "
                        f"its IWAD {iwad.name}")
    return DoomScenario(spec=spec, iwad=iwad, map=level, pwad=path, level=True)


def read_scenario_config(path: Path) -> dict[str, str]:
    """A ViZDoom scenario's .cfg: `key = value` lines (keys lower-case, without underscores), braces skipped."""
    out: dict[str, str] = {}
    for line in path.read_text(errors="replace").splitlines():
        line = line.split("#", 1)[0].strip()
        if "=" in line:
            key, _, value = line.partition("=")
            out[key.strip().lower().replace("_", "")] = value.strip()
    return out


def shipped_scenarios() -> dict[str, Path]:
    """ViZDoom's scenarios whose WAD is shipped too, by name."""
    folder = vizdoom_folder() / "scenarios"
    out = {}
    for cfg in sorted(folder.glob("*.cfg")):
        wad = read_scenario_config(cfg).get("doomscenariopath")
        if wad and (folder / wad).is_file():
            out[cfg.stem] = cfg
    return out


def scenario_of(spec: str):
    """The `DoomScenario` of `doom:scenario:NAME`: the scenario's WAD and map from its .cfg, over Freedoom 2."""
    from playtester.capture.doom import DoomScenario, iwad_path

    name = spec[len("doom:scenario:"):]
    known = shipped_scenarios()
    if name not in known:
        raise UserError(f"game {spec!r}: unknown scenario {name!r}; ViZDoom ships {', '.join(known)}")
    cfg = read_scenario_config(known[name])
    level = cfg.get("doommap", "map01").upper()
    return DoomScenario(spec=spec, iwad=iwad_path("freedoom2"), map=level, pwad=known[name].parent / cfg["doomscenariopath"],
                        level=True)
