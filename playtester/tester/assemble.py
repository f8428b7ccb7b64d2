"""A run assembled once: every checkpoint it names loaded once, its game probed once, and what
they say checked against each other before anything is written.

`load_inputs(spec)` reads the files a run names (the test and preference policies, the detector
with its thresholds and held-out score, the texture reference, the assertions), each refused in one line naming its option. `assemble(spec, inputs)` probes the game
(`probe_game`: started once, then closed) and checks the policies' key maps and the detector
against it. The `Run` it returns is handed down: the explorer takes its preference policy and the
game's probed spaces (no throwaway instance is started to read them), a lone instance playing in
this process takes its test policy and detector, and config.yaml its detector's line. Game
instances in worker processes (or Ray actors) load their own from the paths in `RunSpec`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from playtester.errors import UserError, about
from playtester.tester.spec import RunSpec


class LoadedDetector(NamedTuple):
    """A detector checkpoint read once: the model and what the checkpoint notes beside it."""

    model: Any
    """The `Detector`."""
    thresholds: dict[str, float]
    """Its per-class thresholds for a run (`perception/calibration.py`)."""
    notes: dict[str, Any]
    """`checkpoint["playtester"]`: its held-out scores (config.yaml's `objects_found_by` line)."""


@dataclass
class RunInputs:
    """The files a run names, loaded (`load_inputs`)."""

    tester: Any
    """The test policy (`LivePolicy`), or None."""
    preference: Any
    """The path policy the explorer starts from and is rewarded by (`LivePolicy`), or None."""
    detector: LoadedDetector | None
    texture: Any
    """The texture oracle's reference (`TextureOracle`), or None."""
    plays_here: bool
    """The run's lone game instance plays in this process: it takes the test policy and the
    detector loaded here (on the run's device); otherwise they were loaded on the CPU, to check."""


@dataclass
class Run:
    """A run, assembled once (`assemble`): its spec, its loaded inputs and its probed game."""

    spec: RunSpec
    inputs: RunInputs
    game: Any
    """The game's probe (`GameInfo`: spaces, key map, the park's layout)."""
    game_options: dict[str, Any]
    """What `make_game` takes for every instance (the key map from the loaded policies)."""

    def to_config(self) -> dict[str, Any]:
        """The run's config.yaml (`RunSpec.to_config`), its detector's line from the checkpoint read already."""
        from playtester.tester.object_source import object_source

        detector = self.inputs.detector
        return self.spec.to_config(object_source(self.spec.detector, self.spec.oracle_labels,
                                                 detector.notes if detector else None))

    def here(self) -> RunInputs | None:
        """The loaded test policy and detector for an instance playing in this process, or None
        where the instances load their own (workers, actors, the model server)."""
        return self.inputs if self.inputs.plays_here else None


def plays_here(spec: RunSpec, cluster: bool) -> bool:
    """Whether the run's one instance plays in this process with its own networks: one instance
    (the random explorer, a window game, PPO at one instance), no Ray, no model server."""
    from playtester.tester.serving import serving

    return spec.num_envs == 1 and not cluster and (spec.explorer == "random" or not serving(spec))


def load_inputs(spec: RunSpec, cluster: bool = False) -> RunInputs:
    """Every file `spec` names, loaded once and checked (a bad one is refused in one line naming
    its option, before anything is written)."""
    from playtester.bugs.oracles import TextureOracle, load_assertion
    from playtester.imitation.live import load_policy

    here = plays_here(spec, cluster)
    device = spec.device if here else "cpu"
    with about("--tester"):
        tester = load_policy(spec.tester, map_location=device) if spec.tester else None
    with about("--preference"):
        preference = load_policy(spec.preference) if spec.preference else None
    with about("--texture-reference"):
        texture = TextureOracle.from_coco(spec.texture_reference) if spec.texture_reference else None
    for a in spec.assertions:
        with about("--assert"):
            load_assertion(a)
    with about("--detector"):  # even without --tester: a bad checkpoint is refused, not ignored
        detector = load_detector(spec.detector, device) if spec.detector is not None else None
    return RunInputs(tester, preference, detector, texture, here)


def load_detector(path: str, device: str) -> LoadedDetector:
    """A detector checkpoint, read once: the model, its thresholds and its notes."""
    from playtester.perception.calibration import thresholds_in
    from playtester.perception.detector import load_detector_with_notes

    model, notes = load_detector_with_notes(path, map_location=device)
    return LoadedDetector(model, thresholds_in(notes), notes)


def assemble(spec: RunSpec, inputs: RunInputs) -> Run:
    """The run of `spec` with its loaded `inputs`: its game probed once, the test policy's key map
    and the detector checked against it."""
    from playtester.capture.games import probe_game
    from playtester.tester.instance import make_detector

    game_options = spec.game_options(policies={p: live for p, live in ((spec.tester, inputs.tester),
                                                                        (spec.preference, inputs.preference)) if p})
    game = probe_game(spec.game, **game_options)
    live = inputs.tester
    if live is not None and not game.keymap.same_actions(live.keymap):
        raise UserError(
            f"--tester {spec.tester}: trained with the key map ({', '.join(live.keymap.names)}), but {spec.game} uses "
            f"({', '.join(game.keymap.names)}); train the test policy on demos from this game"
        )
    with about("--detector"):
        make_detector(spec, game.layout, loaded=inputs.detector)
    if inputs.texture is not None:
        kinds = (inputs.detector.model.classes if inputs.detector is not None
                 else [o.kind for o in game.layout.oois] if game.layout else None)
        check_texture_kinds(spec.texture_reference, inputs.texture, kinds)
    return Run(spec, inputs, game, game_options)


def assembled(spec: RunSpec, cluster: bool = False) -> Run:
    """`assemble(spec, load_inputs(spec, cluster))`: a run from code (the benchmarks), without
    the command line's budget checks."""
    return assemble(spec, load_inputs(spec, cluster))


def check_texture_kinds(path: str | Path, texture: Any, kinds: list[str] | None) -> None:
    """Refuse a texture reference with a category the run cannot find (it would never be used)."""
    unknown = sorted(set(texture.reference_aspect) - set(kinds or ())) if kinds is not None else []
    if unknown:
        raise UserError(f"--texture-reference {path}: no object this run finds is called {' or '.join(unknown)} (it finds "
                        f"{', '.join(sorted(set(kinds or ())))}); give reference labels of those objects")
