"""`playtester run`: the tester on a game — explore, detect, test, find bugs, report."""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path
from typing import List, Optional

import typer
import yaml
from rich.console import Console

from playtester.capture.atomic import write_text_atomic
from playtester.capture.errors import UserError
from playtester.commands.options import MANY, about, check_free_disk, check_memory
from playtester.commands.scenario import check_out_parent, progress

console = Console()

KEPT_ON_RESUME = ("game", "explorer", "tester", "preference", "detector", "oracle_labels", "num_envs", "rollout", "seed",
                  "steps", "objective")
"""Options a resumed run must keep: the logs and the explorer's checkpoint were made with them."""


def run(
    game: str = typer.Option(..., "--game", help="Game spec (see `playtester games`)."),
    tester: Optional[Path] = typer.Option(None, "--tester", help="Test policy checkpoint (e.g. the inspect policy), with --detector to find the OOIs it tests; without it the run explores and watches the oracles, testing no OOI."),
    out: Path = typer.Option(..., "--out", help="Run folder, e.g. runs/r1 (refused if it exists, unless --resume or --overwrite)."),
    preference: Optional[Path] = typer.Option(None, "--preference", help="Path-following policy checkpoint: the explorer starts from it and is rewarded for keeping its style (needed by --explorer ppgta)."),
    explorer: str = typer.Option("ppgta", "--explorer", help="ppgta (PPO with RND novelty + the path policy's preference, trained online), inspector (PPO with single-predictor RND, the baseline), random, or evolve (Wuji: a population evolved for exploration and winning, offspring refined by PPO; crash, stuck and assertion oracles on every evaluation)."),
    detector: Optional[str] = typer.Option(None, "--detector", help="Detector checkpoint that finds the OOIs to test (from `playtester train detector`); a run with --tester refuses to start without it or --oracle-labels."),
    oracle_labels: bool = typer.Option(False, "--oracle-labels", help="Find the OOIs through the engine's labels instead of a detector (the built-in park only): an ablation, and the report says so."),
    episodes: int = typer.Option(3, "--episodes", min=1, max=MANY, help="Episodes in the whole run, each from a random start."),
    steps: int = typer.Option(500, "--steps", min=1, max=MANY, help="Game steps per episode (test steps included)."),
    envs: int = typer.Option(2, "--envs", min=1, max=64, help="Game instances played at once by the PPO explorer, one process each."),
    rollout: int = typer.Option(64, "--rollout", min=1, max=MANY, help="PPO steps per game instance between updates."),
    texture_reference: Optional[Path] = typer.Option(None, "--texture-reference", help="COCO labels of healthy OOIs for the texture oracle."),
    assertions: List[str] = typer.Option([], "--assert", help="A user assertion, module:function or file.py:function (repeatable)."),
    stuck_steps: int = typer.Option(40, "--stuck-steps", min=1, max=MANY, help="Steps of unchanged picture under input that count as stuck."),
    test_steps: Optional[int] = typer.Option(None, "--test-steps", min=1, max=MANY, help="Steps of one OOI test (default: the test policy's demo length)."),
    seed: int = typer.Option(0, "--seed", min=0, help="Seed of starts, action sampling and PPO."),
    objective: str = typer.Option("coverage", "--objective", help="coverage (the explorer's own reward) or load (plus RELINE's reward for frame-rate drops: load testing)."),
    load_threshold: Optional[Path] = typer.Option(None, "--load-threshold", help="With --objective load: a threshold file (load_threshold.json of an earlier run); default: measured by random play first."),
    load_area: str = typer.Option("everywhere", "--load-area", help="With --objective load: where frame-rate drops are rewarded, everywhere or pathways."),
    resume: bool = typer.Option(False, "--resume", help="Continue a run that was interrupted (the explorer from its last checkpoint)."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Delete an existing run folder first."),
    map_image: Optional[Path] = typer.Option(None, "--map", help="Bird's-eye map image of a game without built-in ground truth (a window game with telemetry)."),
    map_bounds: Optional[str] = typer.Option(None, "--map-bounds", help="X0,Y0,X1,Y1: the world area (telemetry units) the --map image shows."),
    telemetry_port: Optional[int] = typer.Option(None, "--telemetry-port", min=1, max=65535, help="A window game's UDP port for JSON-line telemetry from its dev build (pos, angle, fps)."),
    oois: Optional[Path] = typer.Option(None, "--oois", help="JSON list of the known OOIs ({id, kind, x, y}): detections are matched to them by telemetry and the report draws them."),
    reward: Optional[str] = typer.Option(None, "--reward", help="evolve: the winning score's reward, module:function or file.py:function over (frame, info); needed where the game has none (a window, the park)."),
    population: int = typer.Option(30, "--population", min=2, max=10_000, help="evolve: policies in the population."),
    generations: int = typer.Option(10, "--generations", min=1, max=MANY, help="evolve: generations to run."),
    max_restarts: int = typer.Option(3, "--max-restarts", min=0, max=1000, help="Game crashes to restart from (each is a crash finding); at one more the run stops, and the report says why."),
    cluster: Optional[str] = typer.Option(None, "--cluster", help="Run the game instances as Ray actors: ray (a local Ray started for this run), auto (the Ray cluster this machine is part of) or ray://HOST:PORT; this process alone writes the run folder (needs pip install -e \".[cluster]\")."),
) -> None:
    """Run the tester: explore the game (the PPO explorer learns as it plays), test every OOI it
    finds with the test policy, judge textures, watch for crashes, stuck states and failed
    assertions; then write the report. Ctrl-C keeps everything written; --resume continues."""
    from playtester.cluster import check_cluster
    from playtester.report import build_report
    from playtester.runner import RunSpec, episodes_left

    if resume and overwrite:
        raise UserError("--resume and --overwrite contradict each other; give one")
    cluster = check_cluster(cluster)
    if cluster and explorer == "evolve":
        raise UserError(f"--cluster {cluster}: --explorer evolve runs on this machine only; give ppgta, inspector or random")
    if explorer == "evolve":  # its own loop: no test policy, no detector (playtester/evolve.py)
        from playtester.evolve import run_evolve_command

        check_out_parent(out)
        check_run_folder(out, resume, overwrite)
        run_evolve_command(game=game, out=out, reward=reward, population=population, generations=generations, steps=steps,
                           envs=envs, assertions=assertions, stuck_steps=stuck_steps, seed=seed, resume=resume,
                           overwrite=overwrite, log=console.print)
        console.print(f"wrote {out} (generations, findings) and the report {build_report(out)}")
        return
    spec = RunSpec(game=game, tester=str(tester) if tester else None, run_dir=str(out), explorer=explorer,
                   preference=str(preference) if preference else None, detector=detector, oracle_labels=oracle_labels,
                   episodes=episodes,
                   steps=steps, num_envs=envs, rollout=rollout,
                   texture_reference=str(texture_reference) if texture_reference else None,
                   assertions=list(assertions), stuck_steps=stuck_steps, test_steps=test_steps, seed=seed,
                   objective=objective, load_threshold=str(load_threshold) if load_threshold else None, load_area=load_area,
                   map=str(map_image.resolve()) if map_image else None, map_bounds=parse_bounds(map_bounds),
                   oois=str(oois.resolve()) if oois else None, telemetry_port=telemetry_port,
                   max_restarts=max_restarts)
    check_out_parent(out)
    check_run_folder(out, resume, overwrite)
    if resume:
        check_same_run(out, spec.to_config())
    check_inputs(spec)  # everything that can be refused is refused before the run folder is written
    with contextlib.ExitStack() as stack:
        if cluster and (not resume or episodes_left(spec) > 0):  # a cluster out of reach too
            from playtester.cluster import ray_session

            stack.enter_context(ray_session(cluster, spec.num_envs))
        if out.exists() and not resume:
            shutil.rmtree(out)  # --overwrite
        out.mkdir(exist_ok=True)
        if not resume:
            write_text_atomic(out / "config.yaml", yaml.safe_dump(spec.to_config(), sort_keys=False))
        play(spec, cluster, resume, episodes - episodes_left(spec))
    report = build_report(out)
    from playtester.crashes import read_stop

    if read_stop(out):
        console.print(f"the run stopped early: {read_stop(out)}")
    console.print(f"wrote {out} (trajectory, tests, findings) and the report {report}")


def play(spec, cluster: str | None, resume: bool, already: int) -> None:
    """Play the run's episodes with its explorer, a progress bar over them."""
    from playtester.runner import episodes_left, explore_at_random, explore_with_ppo

    episodes, explorer = spec.episodes, spec.explorer
    with progress() as bar:
        task = bar.add_task(f"episodes ({explorer} explorer)", total=episodes, completed=already)

        def advance(ended: int) -> None:
            bar.update(task, completed=min(episodes, already + ended))

        if already >= episodes:
            console.print(f"every one of the {episodes} episodes was played (an interrupted one is kept as it was); "
                          "give more --episodes to play on")
        elif explorer == "random" and cluster:
            from playtester.cluster import explore_at_random_on_cluster

            explore_at_random_on_cluster(spec, advance, say=console.print)
        elif explorer == "random":
            explore_at_random(spec, advance, say=console.print)
        else:
            result = explore_with_ppo(spec, advance, resume=resume, cluster=cluster is not None)
            console.print(f"explorer: {result.global_step} steps trained, checkpoint {result.checkpoint}")
        bar.update(task, completed=episodes - episodes_left(spec))


TRAJECTORY_BYTES_PER_STEP = 400
"""An upper bound of one trajectory.jsonl line (a step with position, mode and OOI)."""
FRAME_SIDE = 128
"""The largest frame side the explorer stores in its rollout buffer (uint8 RGB)."""


def check_run_folder(out: Path, resume: bool, overwrite: bool) -> None:
    """Refuse an --out that is a file, or a run folder that exists without --resume or --overwrite;
    on --resume, cut the run's logs back to their last whole records (a stop mid-write tears the last)."""
    from playtester.runlog import cut_torn_lines

    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out}: is a file, not a run folder; give the path of a folder (it is created)")
    if out.exists() and not resume and not overwrite:
        raise UserError(f"--out {out}: the run folder exists; give --resume to continue it or --overwrite to replace it")
    if resume and out.is_dir():
        for line in cut_torn_lines(out):
            console.print(f"--resume: {line}", soft_wrap=True)


def check_inputs(spec) -> None:
    """Load every file the run names and check the budget fits, so that bad input is one line
    naming its option before anything is written."""
    from playtester.capture.games import make_game
    from playtester.imitation.live import load_policy
    from playtester.oracles import TextureOracle, load_assertion
    from playtester.runner import make_detector

    with about("--tester"):
        live = load_policy(spec.tester) if spec.tester else None
    with about("--preference"):
        if spec.preference:
            load_policy(spec.preference)
    with about("--texture-reference"):
        texture = TextureOracle.from_coco(spec.texture_reference) if spec.texture_reference else None
    with about("--load-threshold"):
        if spec.load_threshold:
            from playtester.exploration.load import LoadThreshold

            LoadThreshold.load(spec.load_threshold)
    for a in spec.assertions:
        with about("--assert"):
            load_assertion(a)
    with about("--detector"):
        if spec.detector is not None:
            from playtester.perception.detector import load_detector

            model = load_detector(spec.detector)  # even without --tester: a bad checkpoint is refused, not ignored
    explorer_steps = spec.rollout * spec.num_envs
    if spec.explorer != "random":
        check_memory(explorer_steps * (3 * FRAME_SIDE**2 + 256), f"--rollout {spec.rollout} × --envs {spec.num_envs}")
    check_free_disk(Path(spec.run_dir), spec.episodes * spec.steps * TRAJECTORY_BYTES_PER_STEP,
                    f"--episodes {spec.episodes} × --steps {spec.steps}")
    env = make_game(spec.game, **spec.game_options())
    try:
        if live is not None and not env.unwrapped.keymap.same_actions(live.keymap):
            raise UserError(
                f"--tester {spec.tester}: trained with the key map ({', '.join(live.keymap.names)}), but {spec.game} uses "
                f"({', '.join(env.unwrapped.keymap.names)}); train the test policy on demos from this game"
            )
        with about("--detector"):
            make_detector(spec, env)
        if texture is not None:
            layout = getattr(getattr(env.unwrapped, "scenario", None), "layout", None)
            kinds = model.classes if spec.detector is not None else [o.kind for o in layout.oois] if layout else None
            check_texture_kinds(spec.texture_reference, texture, kinds)
    finally:
        env.close()


def check_texture_kinds(path: str, texture, kinds: list[str] | None) -> None:
    """Refuse a texture reference with a category the run cannot find (it would never be used)."""
    unknown = sorted(set(texture.reference_aspect) - set(kinds or ())) if kinds is not None else []
    if unknown:
        raise UserError(f"--texture-reference {path}: no object this run finds is called {' or '.join(unknown)} (it finds "
                        f"{', '.join(sorted(set(kinds)))}); give reference labels of those objects")


def parse_bounds(text: str | None) -> list[float] | None:
    """`--map-bounds X0,Y0,X1,Y1` as four numbers."""
    if text is None:
        return None
    try:
        values = [float(v) for v in text.split(",")]
    except ValueError:
        values = []
    if len(values) != 4:
        raise UserError(f"--map-bounds {text!r}: give four numbers X0,Y0,X1,Y1")
    return values


def check_same_run(out: Path, now: dict) -> None:
    """Refuse a --resume whose options differ from the interrupted run's (except the budget)."""
    from playtester.runlog import read_config

    if not (out / "config.yaml").exists():
        raise UserError(f"--resume: {out} holds no run to continue (no config.yaml)")
    saved = read_config(out)
    was = dict(saved)
    if was.get("detector") == "ground-truth":  # a run from before --oracle-labels
        was.update(detector=None, oracle_labels=True)
    for key in KEPT_ON_RESUME:
        if key in was and was[key] != now[key]:
            raise UserError(f"--resume: {out} was run with {key.replace('_', '-')}={was[key]!r}, now {now[key]!r}; "
                            "give the same options (only --episodes may grow), or start a new run")
    if now["episodes"] != saved.get("episodes"):
        write_text_atomic(out / "config.yaml", yaml.safe_dump({**saved, "episodes": now["episodes"]}, sort_keys=False))
