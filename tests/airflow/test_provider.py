"""Provider packaging: get_provider_info() against Airflow's own schema, what ProvidersManager and the
`airflow` CLI see (the `airflow txn` group: tests/airflow/test_cli_in_airflow.py runs it), the
`[airflow_txn]` configuration section, the plugins/ shim, and the engine's metrics reaching Airflow's stats."""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import jsonschema
import pyarrow as pa
import pytest

from airflow_txn import Warehouse
from airflow_txn.airflow import provider
from airflow_txn.airflow.hooks.txn import TxnHook, config_from_extra, default_lease_seconds
from airflow_txn.airflow.utils.metrics import AirflowStatsSink, install
from airflow_txn.errors import TxnError
from airflow_txn.telemetry import metrics
from tests.airflow.helpers import recording_stats_backend

pytestmark = pytest.mark.airflow

REPO = Path(__file__).resolve().parents[2]
SHIM = REPO / "plugins" / "airflow_txn_plugin.py"


def provider_schema() -> dict[str, Any]:
    import airflow

    return json.loads((Path(airflow.__file__).parent / "provider_info.schema.json").read_text())  # type: ignore[no-any-return]


def test_provider_info_validates_against_airflows_schema() -> None:
    info = provider.get_provider_info()
    jsonschema.validate(info, provider_schema())
    assert info["package-name"] == "airflow-txn" and info["versions"] == [importlib.metadata.version("airflow-txn")]
    modules = {kind: info[kind][0]["python-modules"] for kind in ("hooks", "operators", "sensors", "triggers")}
    for kind, names in modules.items():
        for name in names:
            assert importlib.util.find_spec(name) is not None, f"{kind} module {name} does not exist"
    options = info["config"]["airflow_txn"]["options"]
    assert set(options) == {"conn_id", "catalog", "root", "storage_options", "oracle", "lease_seconds",
                            "connect_timeout", "listener_timeout", "metrics", "publish", "iceberg_catalog"}
    assert options["storage_options"]["sensitive"] is True  # Airflow hides it (config list, the UI)
    assert options["iceberg_catalog"]["sensitive"] is True  # pyiceberg catalog properties may hold credentials
    assert {o["type"] for o in options.values()} <= {"string", "float", "boolean"}
    assert info["cli"] == ["airflow_txn.cli.in_airflow.get_cli_commands"]  # `airflow txn ...`
    module, _, function = info["cli"][0].rpartition(".")
    [group] = getattr(importlib.import_module(module), function)()
    assert group.name == "txn" and "rollback" in [c.name for c in group.subcommands]


def test_the_installed_airflow_is_inside_the_declared_range() -> None:
    """docs/DESIGN.md, D13: the `airflow` extra declares the releases this suite runs on, so the Airflow
    running these tests must satisfy it (a suite run on a release outside it fails here)."""
    import tomllib

    from packaging.requirements import Requirement

    extra = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]["airflow"]
    [airflow] = [Requirement(r) for r in extra if Requirement(r).name == "apache-airflow"]
    installed = importlib.metadata.version("apache-airflow")
    assert airflow.specifier.contains(installed), f"Airflow {installed} is outside {airflow.specifier}"
    for passed in ("3.3.2", "3.2.2", "3.1.8"):  # a whole run of the suite passed on each (docs/TESTING.md)
        assert airflow.specifier.contains(passed), passed
    for untested in ("3.2.0", "3.2.1", "3.1.7", "3.0.6"):  # below a minor's tested release: never run here
        assert not airflow.specifier.contains(untested), untested
    assert not airflow.specifier.contains("3.4.0")  # the next minor release is untested until the suite runs on it


def test_schema_check_is_not_vacuous() -> None:
    """The schema does refuse a malformed provider info (so the validation above can fail)."""
    broken = provider.get_provider_info()
    broken["config"]["airflow_txn"]["options"]["lease_seconds"]["type"] = "duration"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, provider_schema())
    broken["config"]["airflow_txn"]["options"]["lease_seconds"]["type"] = "float"
    broken["cli"] = "airflow_txn.cli.in_airflow.get_cli_commands"  # a list of functions, not one
    if "cli" in provider_schema()["properties"]:  # Airflow 3.1's schema has no `cli` (version_compat)
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(broken, provider_schema())
    del broken["name"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, provider_schema())


def test_provider_info_points_at_the_projects_docs_and_plugin() -> None:
    import tomllib

    from airflow_txn.airflow.plugins.plugin import AirflowTxnPlugin

    info = provider.get_provider_info()
    urls = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["urls"]
    assert info["documentation-url"] == urls["Documentation"]  # what Airflow shows, from the installed metadata
    [integration] = info["integrations"]
    site_page = integration["external-doc-url"].removeprefix(urls["Documentation"])  # <site>/<NAME>/: docs/<NAME>.md
    assert site_page != integration["external-doc-url"] and (REPO / "docs" / f"{site_page.strip('/')}.md").is_file()
    guides = integration["how-to-guide"]
    assert guides and all(g.startswith("/docs/") and (REPO / g.lstrip("/")).is_file() for g in guides), guides
    [plugin] = info["plugins"]
    module, _, name = plugin["plugin-class"].rpartition(".")
    assert getattr(importlib.import_module(module), name) is AirflowTxnPlugin
    assert plugin["name"] == AirflowTxnPlugin.name == "airflow_txn"


# Loads Airflow's plugins and providers as a component does, with airflow-txn's entry points and
# metadata as this tree's pyproject.toml declares them (tests/airflow/declared_install.py).
PLUGINS_PROBE = """
import json
import tests.airflow.declared_install as declared
declared.install()
from airflow.providers_manager import ProvidersManager
from airflow_txn.airflow.version_compat import loaded_plugins
plugins, errors = loaded_plugins()
mine = [{"name": p.name, "source": str(p.source), "listeners": [m.__name__ for m in p.listeners]}
        for p in plugins if p.name == "airflow_txn"]
manager = ProvidersManager()
info = manager.providers["airflow-txn"].data
print(json.dumps({"plugins": mine, "errors": errors, "documentation_url": info["documentation-url"],
                  "provider_plugins": [p.plugin_class for p in manager.plugins]}))
"""


@pytest.mark.parametrize("lazy", [True, False], ids=["lazy_discover_providers", "eager_providers"])
def test_the_plugin_is_registered_once_whichever_way_airflow_discovers_providers(tmp_path: Path, lazy: bool) -> None:
    """By default Airflow loads the `airflow.plugins` entry point and never the provider info's plugins;
    with `[core] lazy_discover_providers = False` it loads both, and a second `airflow_txn` would be an
    import error ("already registered"): the entry point then hands Airflow nothing."""
    import tomllib

    env = {**os.environ, "AIRFLOW_HOME": str(tmp_path), "AIRFLOW__CORE__PLUGINS_FOLDER": str(tmp_path / "plugins"),
           "AIRFLOW__CORE__LOAD_EXAMPLES": "False", "AIRFLOW__CORE__LAZY_DISCOVER_PROVIDERS": str(lazy)}
    result = subprocess.run([sys.executable, "-c", PLUGINS_PROBE], cwd=REPO, env=env, capture_output=True, text=True,
                            timeout=180, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    # only ours: eagerly, Airflow also registers the OpenLineage provider's own plugin twice, and says so
    assert {k: v for k, v in seen["errors"].items() if "airflow_txn" in f"{k} {v}"} == {}
    [plugin] = seen["plugins"]
    assert plugin["listeners"] == ["airflow_txn.airflow.plugins.listener"]
    assert ("EntryPoint" in plugin["source"]) is lazy  # eager: Airflow took it from the provider info
    # once among the installed providers' plugins (others, e.g. the OpenLineage provider's, may be there too)
    assert [p for p in seen["provider_plugins"] if p.startswith("airflow_txn.")] == [provider.PLUGIN_CLASS]
    urls = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["urls"]
    # Airflow's Providers page links there (3.2 keeps the space after the comma of the Project-URL line)
    assert seen["documentation_url"].strip() == urls["Documentation"]


def test_providers_manager_sees_the_provider() -> None:
    from airflow.providers_manager import ProvidersManager

    from airflow_txn.airflow.version_compat import provider_cli_commands, task_runtime_hooks

    manager = ProvidersManager()
    assert manager.providers["airflow-txn"].version == importlib.metadata.version("airflow-txn")
    manager.initialize_providers_configuration()
    section = dict(manager.provider_configs)["airflow-txn"]["airflow_txn"]
    assert section["options"]["lease_seconds"]["default"] == "3600.0"
    if provider_cli_commands():  # `airflow txn`: the provider info's cli entry (Airflow 3.2+)
        assert "airflow-txn" in manager.cli_command_providers
        assert "get_cli_commands" in [f.__name__ for f in manager.cli_command_functions]
    hook = task_runtime_hooks()["airflow_txn"]
    assert hook is not None and hook.hook_class_name == "airflow_txn.airflow.hooks.txn.TxnHook"
    assert (hook.connection_type, hook.package_name) == ("airflow_txn", "airflow-txn")


def airflow_cli(*args: str, home: Path) -> Any:
    env = {**os.environ, "AIRFLOW_HOME": str(home), "AIRFLOW__CORE__PLUGINS_FOLDER": str(home / "plugins"),
           "AIRFLOW__CORE__LOAD_EXAMPLES": "False"}
    result = subprocess.run([str(Path(sys.executable).parent / "airflow"), *args, "-o", "json"], env=env,
                            capture_output=True, text=True, timeout=120, check=True)
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_airflow_cli_lists_provider_and_one_plugin_with_the_shim_in_place(tmp_path: Path) -> None:
    """A throw-away AIRFLOW_HOME whose plugins folder holds the shim: the entry point registers the
    plugin, the shim stays silent (no second `airflow_txn`, so no 'already registered' error)."""
    (tmp_path / "plugins").mkdir()
    (tmp_path / "plugins" / SHIM.name).write_text(SHIM.read_text())
    providers = airflow_cli("providers", "list", home=tmp_path)
    assert "airflow-txn" in [p["package_name"] for p in providers]
    plugins = [p for p in airflow_cli("plugins", home=tmp_path) if p["name"] == "airflow_txn"]
    assert len(plugins) == 1, plugins
    assert "EntryPoint" in plugins[0]["source"] and plugins[0]["listeners"] == ["airflow_txn.airflow.plugins.listener"]


def load_shim() -> ModuleType:
    spec = importlib.util.spec_from_file_location("airflow_txn_plugin_shim", SHIM)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_shim_defines_the_plugin_only_without_the_entry_point(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow.plugins_manager import AirflowPlugin

    from airflow_txn.airflow.plugins.plugin import AirflowTxnPlugin

    installed = load_shim()
    assert installed.registered_by_entry_point() is True
    assert not [v for v in vars(installed).values() if isinstance(v, type) and issubclass(v, AirflowPlugin)]

    monkeypatch.setattr(importlib.metadata, "entry_points", lambda **_: [])  # code vendored, not installed
    vendored = load_shim()
    assert vendored.registered_by_entry_point() is False
    assert vendored.AirflowTxnPlugin is AirflowTxnPlugin


def test_config_section_fills_what_the_connection_leaves_empty(monkeypatch: pytest.MonkeyPatch,
                                                               tmp_path: Path) -> None:
    monkeypatch.setenv("AIRFLOW_TXN_CATALOG", f"sqlite:///{tmp_path}/env.db")
    monkeypatch.setenv("AIRFLOW__AIRFLOW_TXN__CATALOG", f"sqlite:///{tmp_path}/airflow_cfg.db")
    monkeypatch.setenv("AIRFLOW__AIRFLOW_TXN__ROOT", str(tmp_path / "cfg_root"))
    assert config_from_extra({}).catalog_url == f"sqlite:///{tmp_path}/airflow_cfg.db"  # [airflow_txn] > env
    assert config_from_extra({}).root == str(tmp_path / "cfg_root")
    explicit = config_from_extra({"catalog": f"sqlite:///{tmp_path}/conn.db"})
    assert explicit.catalog_url == f"sqlite:///{tmp_path}/conn.db"  # the connection wins
    monkeypatch.delenv("AIRFLOW__AIRFLOW_TXN__CATALOG")
    assert config_from_extra({}).catalog_url == f"sqlite:///{tmp_path}/env.db"


def test_storage_options_come_from_the_extra_else_the_config_section_taken_whole(
        monkeypatch: pytest.MonkeyPatch) -> None:
    section = {"endpoint_url": "http://from-config:8333", "region": "eu-west-1"}
    monkeypatch.setenv("AIRFLOW__AIRFLOW_TXN__STORAGE_OPTIONS", json.dumps(section))
    monkeypatch.setenv("AIRFLOW_TXN_STORAGE_OPTIONS", json.dumps({"region": "from-env"}))
    root = {"root": "s3://bucket/wh"}
    assert dict(config_from_extra(root).storage_options) == section  # [airflow_txn] > the environment
    extra = {"endpoint_url": "http://from-extra:8333"}
    assert dict(config_from_extra({**root, "storage_options": extra}).storage_options) == extra  # whole, unmerged
    assert dict(config_from_extra({**root, "storage_options": json.dumps(extra)}).storage_options) == extra
    with pytest.raises(TxnError, match=r"unknown storage option\(s\) \['endpoint'\]"):
        config_from_extra({**root, "storage_options": {"endpoint": "x"}})


def test_lease_seconds_option(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AIRFLOW__AIRFLOW_TXN__LEASE_SECONDS", raising=False)
    assert default_lease_seconds() == 3600.0
    monkeypatch.setenv("AIRFLOW__AIRFLOW_TXN__LEASE_SECONDS", "120")
    assert default_lease_seconds() == 120.0
    for bad in ("soon", "-5", "inf", "nan", "604801"):  # issue 16, case 11: at most 7 days, finite
        monkeypatch.setenv("AIRFLOW__AIRFLOW_TXN__LEASE_SECONDS", bad)
        with pytest.raises(TxnError, match="lease_seconds"):
            default_lease_seconds()


class RecordingStatsLogger:
    """A real Airflow stats backend (the StatsLogger protocol) that keeps what it is sent."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, float, dict[str, Any] | None]] = []

    def incr(self, stat: str, count: int = 1, rate: float = 1, *, tags: dict[str, Any] | None = None) -> None:
        self.calls.append(("incr", stat, count, tags))

    def decr(self, stat: str, count: int = 1, rate: float = 1, *, tags: dict[str, Any] | None = None) -> None:
        self.calls.append(("decr", stat, count, tags))

    def gauge(self, stat: str, value: float, rate: float = 1, delta: bool = False, *,
              tags: dict[str, Any] | None = None) -> None:
        self.calls.append(("gauge", stat, value, tags))

    def timing(self, stat: str, dt: Any, *, tags: dict[str, Any] | None = None) -> None:
        self.calls.append(("timing", stat, float(dt), tags))

    def timer(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


@pytest.fixture
def airflow_stats_backend() -> Iterator[RecordingStatsLogger]:
    """Both copies of Airflow's stats module (core's and the task SDK's) set up with one recording
    backend, as Airflow's components do with theirs; restored afterwards."""
    recorder = RecordingStatsLogger()
    with recording_stats_backend(recorder):
        previous_sink = metrics.set_sink(None)
        yield recorder
        metrics.set_sink(previous_sink)


def test_engine_metrics_reach_airflow_stats(airflow_stats_backend: RecordingStatsLogger, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AIRFLOW__AIRFLOW_TXN__METRICS", raising=False)
    monkeypatch.delenv("AIRFLOW_CONN_AIRFLOW_TXN_DEFAULT", raising=False)
    monkeypatch.setenv("AIRFLOW_TXN_CATALOG", f"sqlite:///{tmp_path}/c.db")
    monkeypatch.setenv("AIRFLOW_TXN_ROOT", str(tmp_path / "wh"))
    with TxnHook().warehouse() as wh:  # the first hook of the process installs the forwarding sink
        assert isinstance(metrics.get_sink(), AirflowStatsSink)
        wh.create_table("shop.orders", pa.schema([("id", pa.int64())]))
        with wh.begin() as t:
            t.append("shop.orders", pa.table({"id": [1]}))
        doomed = wh.begin()
        doomed.rollback()
    calls = airflow_stats_backend.calls
    assert [c[:2] for c in calls] == [("gauge", metrics.WATERMARK_LAG), ("timing", metrics.COMMIT_LATENCY),
                                      ("incr", metrics.ROLLBACKS)]  # each once: no double forwarding
    assert calls[1][3] == {"oracle": "sql"} and calls[1][2] > 0 and calls[2][2] == 1 and calls[0][2] == 0


def test_metrics_option_off_installs_nothing(airflow_stats_backend: RecordingStatsLogger, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW__AIRFLOW_TXN__METRICS", "False")
    assert install() is False and not metrics.enabled()
    with Warehouse.open(catalog=f"sqlite:///{tmp_path}/c.db", root=str(tmp_path / "wh")) as wh:
        wh.begin().rollback()
    assert airflow_stats_backend.calls == []
    monkeypatch.setenv("AIRFLOW__AIRFLOW_TXN__METRICS", "True")
    hand_made = metrics.RecordingSink()
    metrics.set_sink(hand_made)
    assert install() is False and metrics.get_sink() is hand_made  # a sink installed by hand is kept


def test_the_provider_has_a_display_name_and_the_form_describes_every_field() -> None:
    """issue 29: `name` is what the Providers page shows (as "Amazon"), the package keeps `package-name`; the
    form has catalog_conn_id and aws_conn_id, and every description is a whole phrase."""
    info = provider.get_provider_info()
    assert (info["name"], info["package-name"]) == ("Airflow Txn", "airflow-txn")
    [conn] = info["connection-types"]
    fields = conn["conn-fields"]
    assert set(fields) == {"catalog", "catalog_conn_id", "root", "oracle", "storage_options", "aws_conn_id",
                           "connect_timeout", "spark_conf", "publish", "iceberg_catalog"}
    for name, field in fields.items():
        assert field["label"] and field["description"].rstrip()[-1] in ")'abcdefghijklmnopqrstuvwxyz", name
        assert not field["description"].endswith(("under their own", ",", " or", " and")), name
