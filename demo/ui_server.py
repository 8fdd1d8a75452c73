"""Start Airflow's API server (UI, REST API and the transactions page) on the demo's home:

    python -m demo.ui_server [--home DIR] [--port 8080] [--user NAME:ROLE:PASSWORD ...]
    (scripts/ui.sh runs it on the demo's home)

The same settings as `python -m demo.airflow_demo --home DIR` (Airflow's home and metadata
database, the example DAGs, the `airflow_txn_default` connection to the demo's warehouse), plus the
SimpleAuthManager users (default admin:admin:admin) with their passwords. It migrates the metadata
database, prints where to go and replaces itself with `airflow api-server` (one worker, loopback).
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

from demo.airflow_demo import configure

ROLES = ("viewer", "user", "op", "admin")
PAGE = "/airflow-txn/"


def parse_user(text: str) -> tuple[str, str, str]:
    """NAME:ROLE:PASSWORD -> (name, role, password)."""
    fields = text.split(":", 2)
    if len(fields) != 3 or not fields[0] or fields[1].lower() not in ROLES or not fields[2]:
        raise argparse.ArgumentTypeError(f"--user takes NAME:ROLE:PASSWORD with ROLE one of {ROLES}, got {text!r}")
    return fields[0], fields[1].lower(), fields[2]


def server_env(home: Path, dags: Path, users: list[tuple[str, str, str]], host: str = "127.0.0.1",
               port: int = 8080) -> dict[str, str]:
    """The environment of the API server: the demo's settings, the users and their passwords file."""
    configure(home, dags)
    airflow_home = Path(os.environ["AIRFLOW_HOME"])
    airflow_home.mkdir(parents=True, exist_ok=True)
    passwords_file = airflow_home / "simple_auth_manager_passwords.json"
    passwords = json.loads(passwords_file.read_text() or "{}") if passwords_file.exists() else {}
    passwords.update({name: password for name, _role, password in users})
    passwords_file.write_text(json.dumps(passwords) + "\n")
    passwords_file.chmod(0o600)
    secret_file = airflow_home / "jwt_secret"
    if not secret_file.exists():
        secret_file.write_text(secrets.token_urlsafe(32))
        secret_file.chmod(0o600)
    return {
        **os.environ,
        "AIRFLOW__CORE__AUTH_MANAGER": "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": ",".join(f"{name}:{role}" for name, role, _ in users),
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(passwords_file),
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "False",
        "AIRFLOW__API_AUTH__JWT_SECRET": secret_file.read_text().strip(),
        "AIRFLOW__API__HOST": host,
        "AIRFLOW__API__PORT": str(port),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", type=Path, default=Path(os.environ.get("AIRFLOW_TXN_HOME") or ".airflow_txn_demo"),
                        help="the demo's home (python -m demo.airflow_demo --home DIR)")
    parser.add_argument("--dags", type=Path, default=Path(__file__).resolve().parents[3] / "dags",
                        help="the DAG folder (default: the clone's dags/)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--user", type=parse_user, action="append", dest="users",
                        help="NAME:ROLE:PASSWORD, ROLE one of viewer, user, op, admin (repeatable; "
                             "default admin:admin:admin)")
    args = parser.parse_args(argv)
    home = args.home.absolute()
    users = args.users or [("admin", "admin", "admin")]
    env = server_env(home, args.dags.absolute(), users, args.host, args.port)
    airflow = [sys.executable, "-m", "airflow"]
    migrated = subprocess.run([*airflow, "db", "migrate"], env=env, capture_output=True, text=True, check=False)
    if migrated.returncode != 0:
        print(migrated.stdout[-2000:] + migrated.stderr[-2000:], file=sys.stderr)
        return migrated.returncode
    url = f"http://{args.host}:{args.port}"
    print(f"Airflow API server on {url} (home {home}); sign in as "
          + ", ".join(f"{name}/{password} ({role})" for name, role, password in users))
    print(f"transactions page: {url}{PAGE}  (in the UI: the Transactions entry of the nav, "
          "or the Transaction tab of a DAG run)", flush=True)
    command = [*airflow, "api-server", "--host", args.host, "--port", str(args.port), "--workers", "1"]
    # Not from the clone: `python -m` puts the working directory on sys.path, and a clone's
    # airflow_txn.egg-info (left by the editable install) would make Airflow find the plugin's entry
    # point twice ("Plugin 'airflow_txn' already registered", listed as a plugin import error).
    os.chdir(home)
    os.execvpe(command[0], command, env)
    return 0  # pragma: no cover - execvpe does not return


if __name__ == "__main__":
    sys.exit(main())
