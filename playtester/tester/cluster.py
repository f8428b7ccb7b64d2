"""`--cluster`: a run's game instances as Ray actors, on this machine or on a Ray cluster (issue 22).

    --cluster ray             a local Ray, started for the command and shut down after it
    --cluster auto            the Ray cluster this machine belongs to (`ray start --head` / `--address`)
    --cluster ray://HOST:PORT a Ray cluster's client port

The games run in actors (`exploration/ray_env.py`); the explorer (PPO's inference and learning)
stays in this process, the driver. Nothing assumes a shared filesystem: each actor's tester loop
(`TesterEnv`) writes into a scratch folder of its own (`RunMirror`), and after every call what it
wrote (whole JSON lines, finished finding folders, `stopped.json`) comes back with the frames;
the driver alone writes the run folder (`RunLink`), in the same format as a local run. What the
instances share goes the other way: each actor gets the OOI claims and crashes the others
appended since its last call. A new actor (at the start, or replacing a lost one) starts from
the run folder as it is: its last episode, the findings it numbered, every claim and crash. The
files a run reads (test policy, detector, OOI list, assertion files, texture reference) are
sent to the actors through Ray's object store. Trajectory lines with a frame time carry
`node`, the Ray node that measured it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import logging
import os
import shutil
import tempfile
import warnings
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np

from playtester.files import write_bytes_atomic
from playtester.errors import UserError
from playtester.exploration.ray_env import RayInstances, import_ray
from playtester.capture.frames import FrameSpec

CLUSTER_HELP = ("ray (a local Ray started for this command), auto (the Ray cluster this machine is part of) or "
                "ray://HOST:PORT (a cluster's client address)")
SHARED_LOGS = ("claims.jsonl", "crashes.jsonl")
"""Logs every instance reads as well as appends: what one appends goes to the others."""
STOPPED = "stopped.json"


def check_cluster(value: str | None) -> str | None:
    """`--cluster` as given, or the one-line error for a value that names no cluster or for Ray
    not installed."""
    if value is None:
        return None
    if not (value in ("ray", "auto") or (value.startswith("ray://") and len(value) > len("ray://"))):
        raise UserError(f"--cluster {value}: use {CLUSTER_HELP}")
    import_ray(f"--cluster {value}")
    return value


@contextlib.contextmanager
def ray_session(value: str, num_cpus: int) -> Iterator[Any]:
    """Ray for one command: started here (`ray`, at least `num_cpus` CPUs) or connected to, and
    shut down at the end either way (a cluster's own processes stay; this driver's actors go)."""
    check_cluster(value)
    ray = import_ray(f"--cluster {value}")
    quiet = {"log_to_driver": False, "logging_level": logging.ERROR}
    if ray.is_initialized():  # a caller (a test, a notebook) started it: use it, leave it running
        yield ray
        return
    try:
        with warnings.catch_warnings():  # the client's timeout warning: the error below says it in one line
            warnings.simplefilter("ignore")
            if value == "ray":
                ray.init(num_cpus=max(num_cpus, os.cpu_count() or 1), include_dashboard=False, **quiet)
            else:
                ray.init(address=value, **quiet)
    except (ConnectionError, RuntimeError, ValueError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise UserError(f"--cluster {value}: cannot connect to a Ray cluster ({first}); start one with `ray start --head`, "
                        "or use --cluster ray") from None
    try:
        cpus = int(ray.cluster_resources().get("CPU", 0))
        if cpus < num_cpus:
            raise UserError(f"--cluster {value}: the cluster has {cpus} CPUs and the run's {num_cpus} game instances need one "
                            "each; give fewer --envs or add nodes")
        yield ray
    finally:
        ray.shutdown()


# -- the run folder, written by the driver alone -------------------------------------------------
_here: "RunMirror | None" = None
"""The run mirror of this actor process (one game instance a process)."""


SCRATCH_PREFIX = "playtester-run-"
"""An actor's scratch run folder in the node's temp folder: `playtester-run-PID-eI-XXXX`."""


def remove_orphaned_scratch() -> None:
    """Scratch folders of actors that were killed (nothing of theirs ran to remove them)."""
    for folder in Path(tempfile.gettempdir()).glob(f"{SCRATCH_PREFIX}*"):
        try:
            os.kill(int(folder.name[len(SCRATCH_PREFIX):].split("-")[0]), 0)
        except ValueError:
            continue
        except ProcessLookupError:
            shutil.rmtree(folder, ignore_errors=True)
        except PermissionError:  # another user's process: alive
            continue


class RunMirror:
    """An actor's side of the run folder: a scratch folder its tester loop writes into, what it
    wrote sent back after each call, what the other instances claimed appended to it."""

    def __init__(self, spec: Any, index: int, seed: dict[str, bytes], findings: list[str],
                 inputs: dict[str, Any]) -> None:
        self.spec, self.index, self.seed, self.findings, self.inputs = spec, index, seed, findings, inputs

    def open(self) -> "RunMirror":
        global _here
        from playtester.exploration.ray_env import node_id

        self.node = node_id()
        remove_orphaned_scratch()
        self.dir = Path(tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{os.getpid()}-e{self.index}-"))
        (self.dir / "findings").mkdir()
        for name, data in self.seed.items():
            (self.dir / name).write_bytes(data)
        for name in self.findings:  # numbered already: the next finding takes the next number
            (self.dir / "findings" / name).mkdir()
        self.offsets = {name: len(data) for name, data in self.seed.items()}
        self.shipped = set(self.findings)
        self.stopped: bytes | None = None
        self.spec = dataclasses.replace(self.spec, run_dir=str(self.dir), **unpack_inputs(self.inputs, self.dir / ".inputs"))
        self.seed = {}
        _here = self
        return self

    def receive(self, lines: dict[str, bytes]) -> None:
        for name, data in lines.items():
            with open(self.dir / name, "ab") as f:
                f.write(data)
            self.offsets[name] = self.offsets.get(name, 0) + len(data)

    def collect(self) -> dict[str, Any] | None:
        up: dict[str, Any] = {}
        for path in self.dir.glob("*.jsonl"):
            start = self.offsets.get(path.name, 0)
            if path.name not in self.offsets:  # a log the driver has not heard of: made there too, empty or not
                self.offsets[path.name] = 0
                up.setdefault("lines", {})[path.name] = b""
            if path.stat().st_size <= start:
                continue
            with open(path, "rb") as f:
                f.seek(start)
                chunk = f.read()
            chunk = chunk[: chunk.rfind(b"\n") + 1]  # a line still being written waits for the next call
            if chunk:
                self.offsets[path.name] = start + len(chunk)
                up.setdefault("lines", {})[path.name] = self._tag(chunk) if path.name == "trajectory.jsonl" else chunk
        places = self.dir / "places"  # a run with no map: the thumbnails of new places
        for thumb in places.glob("*.png") if places.is_dir() else ():
            if thumb.name not in self.shipped:
                up.setdefault("places", {})[thumb.name] = thumb.read_bytes()
                self.shipped.add(thumb.name)
        for folder in (self.dir / "findings").iterdir():
            if folder.is_dir() and folder.name not in self.shipped and not folder.name.endswith(".partial"):
                up.setdefault("findings", {})[folder.name] = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}
                self.shipped.add(folder.name)
                shutil.rmtree(folder)
                folder.mkdir()  # the name stays taken
        stopped = self.dir / STOPPED
        if stopped.exists() and stopped.read_bytes() != self.stopped:
            self.stopped = up[STOPPED] = stopped.read_bytes()
        return up or None

    def _tag(self, chunk: bytes) -> bytes:
        """Frame times are measured on a node: say which."""
        if b"frame_time_ms" not in chunk:
            return chunk
        rows = [json.loads(line) for line in chunk.splitlines() if line.strip()]
        return b"".join((json.dumps({**r, "node": self.node} if "frame_time_ms" in r else r) + "\n").encode() for r in rows)

    def close(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


class RunLink:
    """The driver's side: it alone writes the run folder, from what the actors send back, and the
    finding of each lost worker (`lost`)."""

    def __init__(self, spec: Any) -> None:
        self.spec = spec
        self.run_dir = Path(spec.run_dir)
        self.inputs = stage_inputs(spec)
        self.appended: dict[str, list[tuple[int, bytes]]] = {name: [] for name in SHARED_LOGS}
        self.cursors: dict[int, dict[str, int]] = {}
        self.playing: dict[int, tuple[int, list[int]]] = {}
        """Each instance's episode under way and its actions so far (from its trajectory lines)."""
        (self.run_dir / "findings").mkdir(parents=True, exist_ok=True)

    def setup(self, i: int) -> RunMirror:
        """What a new actor for instance `i` starts from: the run folder as it is now."""
        from playtester.tester.runlog import read_jsonl

        seed = {name: (self.run_dir / name).read_bytes() for name in SHARED_LOGS if (self.run_dir / name).exists()}
        mine = [r for r in read_jsonl(self.run_dir / "trajectory.jsonl") if r.get("env", 0) == i]
        if mine:  # where this instance's episodes got to (`TesterEnv.continue_run`)
            seed["trajectory.jsonl"] = (json.dumps(max(mine, key=lambda r: r["episode"])) + "\n").encode()
        places = [r for r in read_jsonl(self.run_dir / "places.jsonl") if r.get("env", 0) == i]
        if places:  # its places so far, so that their ids go on (`PlaceLog`)
            seed["places.jsonl"] = b"".join((json.dumps(r) + "\n").encode() for r in places)
        prefix = f"e{i}-" if i else ""
        findings = [p.name for p in (self.run_dir / "findings").glob(f"{prefix}*") if not p.name.endswith(".partial")
                    and (i or not p.name.startswith("e"))] if (self.run_dir / "findings").is_dir() else []
        self.cursors[i] = {name: len(chunks) for name, chunks in self.appended.items()}
        return RunMirror(self.spec, i, seed, findings, self.inputs)

    def send(self, i: int) -> dict[str, bytes] | None:
        """What the other instances appended to the shared logs since instance `i`'s last call."""
        out = {}
        for name, chunks in self.appended.items():
            new = b"".join(data for origin, data in chunks[self.cursors[i][name]:] if origin != i)
            self.cursors[i][name] = len(chunks)
            if new:
                out[name] = new
        return out or None

    def receive(self, i: int, up: dict[str, Any]) -> None:
        if up.get("places"):
            (self.run_dir / "places").mkdir(exist_ok=True)
        for name, data in up.get("places", {}).items():
            write_bytes_atomic(self.run_dir / "places" / name, data)
        for name, data in up.get("lines", {}).items():
            with open(self.run_dir / name, "ab") as f:
                f.write(data)
            if name in self.appended:
                self.appended[name].append((i, data))
            if name == "trajectory.jsonl":
                self._follow(data)
        for name, files in up.get("findings", {}).items():
            partial = self.run_dir / "findings" / f"{name}.partial"
            shutil.rmtree(partial, ignore_errors=True)
            partial.mkdir(parents=True)
            for file, data in files.items():
                (partial / file).write_bytes(data)
            partial.rename(self.run_dir / "findings" / name)
        if STOPPED in up and not (self.run_dir / STOPPED).exists():  # the first instance to stop says why
            write_bytes_atomic(self.run_dir / STOPPED, up[STOPPED])


    def _follow(self, chunk: bytes) -> None:
        for line in chunk.splitlines():
            row = json.loads(line)
            env, episode = int(row.get("env", 0)), int(row["episode"])
            if self.playing.get(env, (None,))[0] != episode:
                self.playing[env] = (episode, [])
            self.playing[env][1].append(int(row["action"]))

    def lost(self, i: int, reason: str, node: str | None) -> None:
        """Instance `i`'s worker is lost (its node gone, its actor killed): a finding of kind `lost`
        for the episode it was playing, with that episode's actions (`lost-eI-KK`). The game goes
        on in a new worker; the report lists the finding with the others."""
        from playtester.bugs.findings import save_finding
        from playtester.bugs.oracles import Finding

        episode, actions = self.playing.pop(i, (None, []))
        where = f" on node {node}" if node else ""
        if episode is None:
            message = f"game instance {i}'s Ray worker was lost{where} ({reason}) before its episode's first step"
        else:
            message = (f"game instance {i}'s Ray worker was lost{where} ({reason}): its episode {episode} ended there, "
                       f"at step {len(actions)}")
        folder = self.run_dir / "findings"
        name = f"lost-e{i}-{len(list(folder.glob(f'lost-e{i}-*'))):02d}"
        save_finding(folder / name, Finding("lost", message + "; the game goes on in a new worker", episode or 0, len(actions),
                                            {"env": i, "node": node, "reason": reason}),
                     game=self.spec.game, game_options=self.spec.game_options(), reset={"seed": None, "options": None},
                     actions=actions, frames=[], fps=10.0)


INPUT_FILES = ("tester", "detector", "oois")
"""The `RunSpec` fields naming one file an actor's tester loop reads."""


def stage_inputs(spec: Any) -> dict[str, Any]:
    """The files the actors' tester loops read, put in Ray's object store once for all of them
    (no shared filesystem assumed): field → (name, ref), or for assertions a list."""
    ray = import_ray()
    staged: dict[str, Any] = {}
    for field in INPUT_FILES:
        path = getattr(spec, field)
        if path and Path(path).is_file():
            staged[field] = {Path(path).name: ray.put(Path(path).read_bytes())}
    if spec.texture_reference:  # labels.json and the images it names
        labels = Path(spec.texture_reference)
        doc = json.loads(labels.read_text())
        files = {labels.name: labels.read_bytes()}
        for img in doc.get("images", []):
            if (labels.parent / img["file_name"]).is_file():
                files[img["file_name"]] = (labels.parent / img["file_name"]).read_bytes()
        staged["texture_reference"] = {name: ray.put(data) for name, data in files.items()}
    assertions = []
    for a in spec.assertions:
        where, _, function = a.rpartition(":")
        if where.endswith(".py") and Path(where).is_file():
            assertions.append((function, {Path(where).name: ray.put(Path(where).read_bytes())}))
        else:
            assertions.append((a, None))
    staged["assertions"] = assertions
    return staged


def unpack_inputs(staged: dict[str, Any], folder: Path) -> dict[str, Any]:
    """Write the staged files under `folder` on this node; the `RunSpec` fields naming them there."""
    import ray

    def write(files: dict[str, Any], into: Path) -> Path:
        first = None
        for name, ref in files.items():
            path = into / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(ray.get(ref))
            first = first or path
        return first

    fields: dict[str, Any] = {}
    for field, files in staged.items():
        if field != "assertions":
            fields[field] = str(write(files, folder / field))
    fields["assertions"] = [a if files is None else f"{write(files, folder / f'assert{j}')}:{a}"
                            for j, (a, files) in enumerate(staged.get("assertions", []))]
    return fields


def tester_on_worker(env: Any, index: int) -> Any:
    """The `wrap` of a run's game instance in an actor: its tester loop, on the scratch run folder."""
    from playtester.tester.instance import tester_env

    if _here is None:
        raise RuntimeError("tester_on_worker: no run mirror opened in this process (RayVectorEnv opens it)")
    return tester_env(_here.spec, env, index)


UNSEEN = FrameSpec.square(32)
"""The frames the random explorer's actor sends back: no network sees them (the random explorer
picks its keys blind; the tester loop in the actor sees the game's own frames), so small."""


def ray_instances(spec: Any, env_fns: list[Callable[[], Any]]) -> RayInstances:
    """A run's game factories as Ray actors writing through the driver."""
    return RayInstances(env_fns, RunLink(spec))


# -- the random explorer ---------------------------------------------------------------------------
def random_instance(spec: Any) -> Any:
    """The random explorer's one game instance, in an actor; its frames come back at `UNSEEN`."""
    from playtester.capture.envs import make_env

    return make_env(spec.game, UNSEEN, game_options=spec.game_options(), wrap=tester_on_worker)


def explore_at_random_on_cluster(spec: Any, progress: Callable[[int], None] = lambda n: None,
                                 say: Callable[[str], None] = print) -> None:
    """`runner.explore_at_random` with its game in a Ray actor: uniform random actions until the
    episode budget is played or the game stops the run."""
    from playtester.tester.crashes import clear_stop
    from playtester.exploration.ray_env import RayVectorEnv
    from playtester.tester.instance import all_idle, run_stopped

    clear_stop(Path(spec.run_dir))
    envs = RayVectorEnv([functools.partial(random_instance, spec)], link=RunLink(spec))
    rng = np.random.default_rng(spec.seed + 1)
    ended = 0
    try:
        _, infos = envs.reset()
        while not (all_idle(infos) or run_stopped(infos)):
            _, _, _, _, infos = envs.step(rng.integers(envs.single_action_space.n, size=1))
            if "_final_info" in infos and infos["_final_info"][0]:  # a crash is said from crashes.jsonl, as for every run
                ended += 1
                progress(ended)
        if run_stopped(infos):
            say(f"the run stops: {infos['run_stopped'][0]}")
    finally:
        envs.close()


# -- demos ------------------------------------------------------------------------------------------
DEMO_CHUNK = 4
"""Most episodes one Ray task records (what it sends back is held in memory until written)."""


def demo_chunk(options: dict[str, Any], seed: int, episodes: int) -> list[dict[str, Any]]:
    """A Ray task: the expert demos of `playtester demos` for `episodes` episodes from `seed` (episode i uses seed+i,
    as on one machine) into a scratch folder of this node; the episodes' files, in order."""
    from playtester.datasets.episodes import episode_folders
    from playtester.imitation.demos import record_demos

    with tempfile.TemporaryDirectory(prefix="playtester-demos-") as tmp:
        out = Path(tmp) / "demos"
        record_demos(out, seed=seed, episodes=episodes, **options)
        recorded = []
        for folder in sorted(episode_folders(out)):
            video = out / f"{folder.name}.mp4"
            recorded.append({"files": {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()},
                             "video": video.read_bytes() if video.exists() else None})
        return recorded


def demos_on_cluster(cluster: str, out: Path, episodes: int, seed: int, options: dict[str, Any],
                     advance: Callable[[], None] = lambda: None) -> list[Path]:
    """`playtester demos --cluster`: the episodes recorded by Ray tasks (a task whose worker dies
    runs again elsewhere), written into `out` by this process alone, in seed order, each as
    `NAME.partial` renamed when whole; the episode folders written."""
    import math

    from playtester.datasets.episodes import PARTIAL_SUFFIX, next_episode_name

    with ray_session(cluster, 1) as ray:
        cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
        per = max(1, min(DEMO_CHUNK, math.ceil(episodes / cpus)))
        task = ray.remote(num_cpus=1, max_retries=3)(demo_chunk)
        refs = [task.remote(options, seed + start, min(per, episodes - start)) for start in range(0, episodes, per)]
        written = []
        out.mkdir(exist_ok=True)
        for ref in refs:
            try:
                chunk = ray.get(ref)
            except ray.exceptions.RayTaskError as e:
                if isinstance(e.cause, UserError):
                    raise e.cause from None
                raise
            for episode in chunk:
                name = next_episode_name(out)
                partial = out / (name + PARTIAL_SUFFIX)
                partial.mkdir()
                for file, data in episode["files"].items():
                    (partial / file).write_bytes(data)
                if episode["video"] is not None:
                    write_bytes_atomic(out / f"{name}.mp4", episode["video"])
                partial.rename(out / name)
                written.append(out / name)
                advance()
        return written
