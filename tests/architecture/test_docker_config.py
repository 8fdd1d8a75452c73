"""docker/docker-compose.yml: Docker Compose v2 validates it (`config`, no engine needed), and the
resolved file wires the stack the way docs/DEPLOYMENT.md says.

The compose command comes from scripts/ensure_compose.sh's choices: `docker compose`, a v2
`docker-compose` on PATH, or the one that script installs into the venv. Without any, the tests are
skipped with the reason, unless AIRFLOW_TXN_TEST_COMPOSE is set (scripts/test.sh sets it after
installing compose), which makes a missing compose a failure.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from packaging.requirements import Requirement

from airflow_txn.oracle.zookeeper import ZooKeeperSpec

REPO = Path(__file__).resolve().parents[2]
COMPOSE_FILE = REPO / "docker" / "docker-compose.yml"
DOCKERFILE = REPO / "docker" / "Dockerfile"
DOCKERIGNORE = REPO / "docker" / "Dockerfile.dockerignore"
WAREHOUSE = "/data/warehouse"  # the shared volume's path: the root with WAREHOUSE_ROOT=/data/warehouse
S3_ROOT = "s3://airflow-txn/warehouse"  # the default root: bucket airflow-txn on the seaweedfs service
AIRFLOW_SERVICES = ["airflow-init", "airflow-apiserver", "airflow-scheduler", "airflow-dag-processor",
                    "airflow-triggerer"]
SPARK_SERVICES = ["spark-master", "spark-worker-1", "spark-worker-2", "spark-connect"]
ZK_SERVICES = ["zk1", "zk2", "zk3"]
S3_SERVICES = ["seaweedfs", "s3-bucket"]
ONE_SHOT = {"airflow-init", "s3-bucket"}


def _works(cmd: list[str]) -> bool:
    try:
        out = subprocess.run([*cmd, "version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0 and " v2." in out.stdout


def compose_command() -> list[str] | None:
    candidates = [["docker", "compose"]] if shutil.which("docker") else []
    on_path = shutil.which("docker-compose")
    if on_path:
        candidates.append([on_path])
    candidates.append([str(Path(sys.executable).parent / "docker-compose")])
    return next((c for c in candidates if _works(c)), None)


@pytest.fixture(scope="module")
def compose() -> list[str]:
    cmd = compose_command()
    if cmd is None:
        reason = "Docker Compose v2 is not installed (bash scripts/ensure_compose.sh installs it into .venv)"
        if os.environ.get("AIRFLOW_TXN_TEST_COMPOSE"):
            pytest.fail(reason)
        pytest.skip(reason)
    return cmd


def run_compose(compose: list[str], *args: str,
                env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The file as it ships: no docker/.env (a local choice, e.g. WAREHOUSE_ROOT) and no WAREHOUSE_ROOT
    inherited from the caller's environment, unless `env` sets it."""
    inherited = {k: v for k, v in os.environ.items() if k != "WAREHOUSE_ROOT"}
    return subprocess.run([*compose, "-f", str(COMPOSE_FILE), "--env-file", os.devnull, *args], capture_output=True,
                          text=True, timeout=60, env={**inherited, **(env or {})})


@pytest.fixture(scope="module")
def stack(compose: list[str]) -> dict[str, Any]:
    result = run_compose(compose, "config", "--format", "json")
    assert result.returncode == 0, result.stderr
    config: dict[str, Any] = json.loads(result.stdout)
    return config


def test_compose_file_validates(compose: list[str]) -> None:
    result = run_compose(compose, "config", "-q")
    assert result.returncode == 0 and result.stdout == "", result.stderr


def test_compose_refuses_a_broken_file(compose: list[str], tmp_path: Path) -> None:
    """The check can fail: an unknown depends_on condition is rejected, naming what is allowed."""
    broken = tmp_path / "docker-compose.yml"
    broken.write_text(COMPOSE_FILE.read_text().replace("condition: service_completed_successfully",
                                                       "condition: service_finished", 1))
    result = subprocess.run([*compose, "-f", str(broken), "config", "-q"], capture_output=True, text=True, timeout=60,
                            cwd=COMPOSE_FILE.parent)
    assert result.returncode != 0 and "condition value must be one of" in result.stderr, result.stderr


def test_every_service_of_the_stack_is_there(stack: dict[str, Any]) -> None:
    assert set(stack["services"]) == {"postgres", *S3_SERVICES, *ZK_SERVICES, *SPARK_SERVICES, *AIRFLOW_SERVICES}
    long_running = [name for name in stack["services"] if name not in ONE_SHOT]
    assert [n for n in long_running if "healthcheck" not in stack["services"][n]] == []
    assert {stack["services"][n]["restart"] for n in ONE_SHOT} == {"no"}


def test_airflow_and_spark_share_the_warehouse_volume(stack: dict[str, Any]) -> None:
    """The volume stays mounted everywhere: with WAREHOUSE_ROOT=/data/warehouse it is the root (Spark DAGs)."""
    for name in [*AIRFLOW_SERVICES, *SPARK_SERVICES]:
        mounts = {(v["source"], v["target"]) for v in stack["services"][name]["volumes"]}
        assert ("warehouse", WAREHOUSE) in mounts, name
    images = {stack["services"][n]["image"] for n in [*AIRFLOW_SERVICES, *SPARK_SERVICES]}
    assert images == {"airflow-txn:local"}  # driver and executors: one Spark, one Python


def test_the_image_is_built_once(stack: dict[str, Any]) -> None:
    """One service builds airflow-txn:local; every other service that runs it names the image only and never
    tries to pull it (it is on no registry), so `up --build` builds it once."""
    services = stack["services"]
    built = [name for name, svc in services.items() if "build" in svc]
    assert built == ["airflow-init"]
    assert services["airflow-init"]["image"] == "airflow-txn:local"
    users = {name for name, svc in services.items() if svc.get("image") == "airflow-txn:local"}
    assert users == {*AIRFLOW_SERVICES, *SPARK_SERVICES, "s3-bucket"}
    assert {services[name].get("pull_policy") for name in users - {"airflow-init"}} == {"never"}


def test_warehouse_settings_point_at_the_stack(stack: dict[str, Any]) -> None:
    services = stack["services"]
    for name in AIRFLOW_SERVICES:
        env = services[name]["environment"]
        assert env["AIRFLOW_TXN_ROOT"] == S3_ROOT
        catalog = urlsplit(env["AIRFLOW_TXN_CATALOG"])
        assert catalog.scheme == "postgresql+psycopg" and catalog.hostname == "postgres"
        assert catalog.path == "/airflow_txn"
        spec = ZooKeeperSpec.parse(env["AIRFLOW_TXN_ORACLE"])
        assert sorted(h.split(":")[0] for h in spec.hosts.split(",")) == ZK_SERVICES
        conn = json.loads(env["AIRFLOW_CONN_AIRFLOW_TXN_DEFAULT"])
        assert conn["conn_type"] == "airflow_txn" and set(conn["extra"]) <= {"catalog", "root", "oracle",
                                                                             "storage_options", "spark_conf"}
        spark_conf = conn["extra"]["spark_conf"]
        assert spark_conf["spark.remote"] == "sc://spark-connect:15002"  # the tasks attach: no driver of theirs
        assert not {k for k in spark_conf if k in ("spark.master", "spark.driver.host")}  # works on any executor
        assert env["AIRFLOW__CORE__EXECUTOR"] == "LocalExecutor"
    init_sql = (REPO / "docker" / "postgres" / "init-databases.sql").read_text()
    assert re.search(r"CREATE DATABASE airflow_txn\b", init_sql)
    assert services["postgres"]["environment"]["POSTGRES_DB"] == "airflow"


def test_the_object_store_holds_the_root(stack: dict[str, Any]) -> None:
    """Every Airflow service reaches seaweedfs's S3 gateway with an identity the gateway knows, and the
    one-shot s3-bucket service, with the same settings, creates the root's bucket before airflow-init."""
    services = stack["services"]
    seaweedfs = services["seaweedfs"]
    command = seaweedfs["command"]
    assert command[0] == "server" and "-s3" in command and "-s3.config=/etc/seaweedfs/s3.json" in command
    assert "-ip=seaweedfs" in command
    mounts = {v["target"]: v["source"] for v in seaweedfs["volumes"]}
    assert mounts["/data"] == "seaweedfs-data"
    assert Path(mounts["/etc/seaweedfs/s3.json"]) == REPO / "docker" / "seaweedfs" / "s3.json"
    identities = json.loads((REPO / "docker" / "seaweedfs" / "s3.json").read_text())["identities"]
    keys = {(c["accessKey"], c["secretKey"]) for i in identities for c in i["credentials"]}
    for name in [*AIRFLOW_SERVICES, "s3-bucket", "spark-connect"]:  # the data source opens it in spark-connect
        env = services[name]["environment"]
        root = urlsplit(env["AIRFLOW_TXN_ROOT"])
        assert (root.scheme, root.netloc, root.path) == ("s3", "airflow-txn", "/warehouse"), name
        options = json.loads(env["AIRFLOW_TXN_STORAGE_OPTIONS"])
        assert set(options) == {"endpoint_url", "region", "access_key_id", "secret_access_key"}, name
        endpoint = urlsplit(options["endpoint_url"])
        assert (endpoint.scheme, endpoint.hostname, endpoint.port) == ("http", "seaweedfs", 8333), name
        assert (options["access_key_id"], options["secret_access_key"]) in keys, name
    assert services["s3-bucket"]["image"] == "airflow-txn:local"  # pyarrow's S3 client makes the bucket
    assert services["s3-bucket"]["depends_on"]["seaweedfs"]["condition"] == "service_healthy"
    init = services["airflow-init"]["depends_on"]
    assert init["s3-bucket"]["condition"] == "service_completed_successfully"
    for name in AIRFLOW_SERVICES:
        assert services[name]["depends_on"]["seaweedfs"]["condition"] == "service_healthy", name


def test_the_shared_volume_can_be_the_root(compose: list[str]) -> None:
    """WAREHOUSE_ROOT=/data/warehouse: the layout the Spark DAGs need in this release (every executor mounts
    the root); the bucket service then has nothing to do."""
    result = run_compose(compose, "config", "--format", "json", env={"WAREHOUSE_ROOT": WAREHOUSE})
    assert result.returncode == 0, result.stderr
    services = json.loads(result.stdout)["services"]
    for name in [*AIRFLOW_SERVICES, "s3-bucket"]:
        assert services[name]["environment"]["AIRFLOW_TXN_ROOT"] == WAREHOUSE, name


def test_zookeeper_is_a_three_node_ensemble(stack: dict[str, Any]) -> None:
    ids = set()
    for name in ZK_SERVICES:
        env = stack["services"][name]["environment"]
        ids.add(env["ZOO_MY_ID"])
        servers = env["ZOO_SERVERS"].split()
        assert [s.split("=")[1].split(":")[0] for s in servers] == ZK_SERVICES
    assert ids == {"1", "2", "3"}


def test_start_order(stack: dict[str, Any]) -> None:
    services = stack["services"]
    init = services["airflow-init"]["depends_on"]
    assert {n: init[n]["condition"] for n in ("postgres", "seaweedfs", *ZK_SERVICES)} == dict.fromkeys(
        ("postgres", "seaweedfs", *ZK_SERVICES), "service_healthy")
    for name in AIRFLOW_SERVICES[1:]:
        assert services[name]["depends_on"]["airflow-init"]["condition"] == "service_completed_successfully"
    assert services["airflow-scheduler"]["depends_on"]["spark-connect"]["condition"] == "service_healthy"
    assert {"spark-worker-1", "spark-worker-2", "airflow-init"} <= set(services["spark-connect"]["depends_on"])
    for worker in ("spark-worker-1", "spark-worker-2"):
        assert services[worker]["depends_on"]["spark-master"]["condition"] == "service_healthy"


def test_versions_can_be_overridden(compose: list[str]) -> None:
    result = run_compose(compose, "config", "--format", "json", env={"PYSPARK_VERSION": "4.0.1"})
    assert result.returncode == 0, result.stderr
    args = json.loads(result.stdout)["services"]["airflow-init"]["build"]["args"]
    assert args["PYSPARK_VERSION"] == "4.0.1"


# --- docker/Dockerfile, read as text (no Docker engine here: these checks need no compose either) ---


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of docker/Dockerfile, continuation lines joined, comments dropped."""
    lines = [line for line in DOCKERFILE.read_text().splitlines() if not line.lstrip().startswith("#")]
    joined = re.sub(r"\\\n\s*", " ", "\n".join(lines))
    return [(m.group(1).upper(), m.group(2).strip()) for m in re.finditer(r"^(\w+)\s+(.*)$", joined, re.MULTILINE)]


def dockerfile_args() -> dict[str, str]:
    """The build arguments' defaults, each expanded with the ones declared before it."""
    args: dict[str, str] = {}
    for instruction, rest in dockerfile_instructions():
        if instruction == "ARG" and "=" in rest:
            name, default = rest.split("=", 1)
            args[name] = expand(default, args)
    return args


def expand(text: str, args: dict[str, str]) -> str:
    return re.sub(r"\$\{(\w+)\}", lambda m: args.get(m.group(1), m.group(0)), text)


def runs() -> list[str]:
    return [rest for instruction, rest in dockerfile_instructions() if instruction == "RUN"]


def test_image_is_built_on_airflows_image_with_its_constraints() -> None:
    args = dockerfile_args()
    froms = [rest for instruction, rest in dockerfile_instructions() if instruction == "FROM"]
    assert [expand(f, args) for f in froms] == [f"apache/airflow:{args['AIRFLOW_VERSION']}-python3.11"]
    assert args["PYTHON_VERSION"] == "3.11"
    assert expand("${AIRFLOW_CONSTRAINTS_URL}", args) == (
        f"https://raw.githubusercontent.com/apache/airflow/constraints-{args['AIRFLOW_VERSION']}/constraints-3.11.txt")
    pips = [r for r in runs() if r.startswith("pip install")]
    constrained = [r for r in pips if "--constraint" in r]
    assert len(constrained) == 1 and '"apache-airflow[postgres]==${AIRFLOW_VERSION}"' in constrained[0]
    assert constrained[0].endswith('--constraint "${AIRFLOW_CONSTRAINTS_URL}"')
    # every later install holds Airflow at the constrained version, as Airflow's docs ask
    assert all('"apache-airflow==${AIRFLOW_VERSION}"' in r or r in constrained for r in pips), pips


def test_image_installs_what_the_stack_runs() -> None:
    installs = " ".join(runs())
    assert '"pyspark==${PYSPARK_VERSION}"' in installs
    assert '"/src/airflow-txn[airflow,spark,spark-connect,postgres,zookeeper]"' in installs
    assert "default-jre-headless" in installs and "procps" in installs  # Spark's JVM and the ps its scripts call
    assert "/data/warehouse" in installs and "/opt/spark/work" in installs
    instructions = dockerfile_instructions()
    assert ("COPY", "--chown=airflow:0 dags/ ${AIRFLOW_HOME}/dags/") in instructions
    users = [rest for instruction, rest in instructions if instruction == "USER"]
    assert users[-1] == "airflow"  # the image's own user runs everything


def test_image_gets_every_file_the_package_build_reads() -> None:
    """pyproject's readme and license files must be in the build context (Dockerfile.dockerignore) and
    copied next to pyproject.toml: setuptools fails on a license file pattern that matches nothing."""
    with (REPO / "pyproject.toml").open("rb") as f:
        meta = tomllib.load(f)["project"]
    needed = ["pyproject.toml", meta["readme"], *meta["license-files"]]
    copied = " ".join(rest for instruction, rest in dockerfile_instructions() if instruction == "COPY")
    patterns = [line.strip() for line in DOCKERIGNORE.read_text().splitlines()
                if line.strip() and not line.startswith("#")]
    for name in needed:
        assert (REPO / name).is_file(), name
        assert re.search(rf"\s{re.escape(name)}\s.*/src/airflow-txn/", copied), f"the Dockerfile does not copy {name}"
        included = None
        for pattern in patterns:  # the last matching pattern decides, as Docker reads the file
            if pattern.lstrip("!").rstrip("/") in ("*", name):
                included = pattern.startswith("!")
        assert included, f"Dockerfile.dockerignore keeps {name} out of the build context"


def test_image_airflow_is_inside_the_declared_range() -> None:
    """docs/DESIGN.md, D13: the image runs a release the `airflow` extra allows, the compose file builds the same."""
    with (REPO / "pyproject.toml").open("rb") as f:
        extra = tomllib.load(f)["project"]["optional-dependencies"]["airflow"]
    [airflow] = [Requirement(r) for r in extra if Requirement(r).name == "apache-airflow"]
    args = dockerfile_args()
    assert airflow.specifier.contains(args["AIRFLOW_VERSION"]), (args["AIRFLOW_VERSION"], str(airflow.specifier))
    compose = COMPOSE_FILE.read_text()
    for name in ("AIRFLOW_VERSION", "PYSPARK_VERSION"):
        assert f"{name}: ${{{name}:-{args[name]}}}" in compose, f"compose builds another {name} by default"


def test_services_that_are_not_airflow_start_their_own_command() -> None:
    """Airflow's image entrypoint runs `airflow db check` and hands any command but bash/python to
    `airflow`: the Spark services and the bucket maker must run their command with a plain entrypoint."""
    yaml = pytest.importorskip("yaml")
    services = yaml.safe_load(COMPOSE_FILE.read_text())["services"]
    built = {name for name, svc in services.items() if svc.get("image") == "airflow-txn:local"}
    plain = {name for name in built if services[name].get("entrypoint") == ["/usr/bin/dumb-init", "--"]}
    assert plain == {*SPARK_SERVICES, "s3-bucket"}
    for name in built - plain:  # Airflow's components keep Airflow's entrypoint, and run `airflow ...` or bash
        assert name in AIRFLOW_SERVICES and services[name]["command"][0] in ("airflow", "bash"), name
