"""scripts/bench_loop.py's side-by-side machinery: a tree run from a site folder imports that tree."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

import bench_loop  # noqa: E402


def test_a_site_folder_imports_its_own_tree_not_the_editable_install(tmp_path):
    site = bench_loop.site_folder(bench_loop.ROOT, tmp_path / "site")
    assert Path(bench_loop.imported(site)) == site / "playtester" / "__init__.py"
    # every mapped area sits where it is installed, package data too
    assert (site / "playtester" / "capture" / "frames.py").resolve() == bench_loop.ROOT / "capture" / "frames.py"
    assert (site / "playtester" / "tester" / "loop.py").is_file()
    assert list((site / "playtester" / "capture" / "keymaps").glob("*.yaml"))
    assert bench_loop.run_words(site) == ["run", "explore"]


def test_a_tree_from_before_the_run_subcommands_runs_the_one_command_form(tmp_path):
    (tmp_path / "playtester" / "commands").mkdir(parents=True)
    assert bench_loop.run_words(tmp_path) == ["run"]
