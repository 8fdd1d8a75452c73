"""MkDocs hooks of the documentation site (mkdocs.yml): the pages the site has beyond docs/, and the links
that leave docs/.

- The repository's README.md becomes the site's Overview page (overview.md), its CHANGELOG.md the Changelog
  page (changelog.md): REPOSITORY_PAGES.
- The API reference pages (api/*.md) are written from the lists the package already keeps of its public
  names: `airflow_txn.__all__`, `airflow_txn.spark.__all__`, the Airflow layer's `public.PUBLIC` and the
  provider info's task decorators, so a new public name appears without editing a page. mkdocstrings renders
  each from its docstrings.
- A relative link to a file outside docs/ (`../dags/daily_incremental.py`, `docs/..` from the README) works on
  GitHub as written; on the site it becomes the file's address in the repository (mkdocs.yml's repo_url), and
  a link to a file that does not exist stays as written, so the strict build fails on it.
- site_url and repo_url must be pyproject.toml's [project.urls] Documentation and Source (the provider info
  links there too): a difference is a warning, which fails the strict build.
- InheritedKeywords, a Griffe extension: an operator's signature shows the keyword arguments it passes on to
  its base class through **kwargs (`conn_id`, ...), which its docstring documents.
"""

from __future__ import annotations

import logging
import posixpath
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit
from xml.etree import ElementTree

import griffe
import markdown
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

log = logging.getLogger("mkdocs.hooks.airflow_txn")

REPO = Path(__file__).resolve().parent.parent
DOCS = "docs"
OVERVIEW = "overview.md"
"""Where the repository's README.md is on the site."""
REPOSITORY_PAGES = {OVERVIEW: "README.md", "changelog.md": "CHANGELOG.md"}
"""{site path: file of the repository outside docs/} of the pages the site takes from the repository's root."""
BRANCH = "main"


def _page(title: str, intro: str, sections: list[tuple[str, list[str]]]) -> str:
    """An API page: each section a heading and the `::: identifier` blocks mkdocstrings expands."""
    lines = [f"# {title}", "", intro, ""]
    for heading, identifiers in sections:
        lines += [f"## {heading}", ""] if heading else []
        lines += [f"::: {identifier}\n" for identifier in identifiers]
    return "\n".join(lines)


API_INDEX = """# API reference

Generated from the docstrings of the public names (docs/DESIGN.md, D20); the command line is in
[CLI.md](../CLI.md).

- [Core](core.md): `import airflow_txn`: the Warehouse, the Transaction and what they return
- [Errors](errors.md): `airflow_txn.errors`
- [Spark](spark.md): `import airflow_txn.spark`
- [Checks](checks.md): `airflow_txn.checks`, write-audit-publish
- [Airflow](airflow.md): the operators, sensors, hooks, triggers, task decorators and helpers of the provider
"""


def api_pages() -> dict[str, str]:
    """{site path: markdown} of the API reference, from the package's own lists of public names."""
    import airflow_txn
    import airflow_txn.checks
    import airflow_txn.spark
    from airflow_txn.airflow import provider, public

    first = ["Warehouse", "Transaction"]  # then what they return
    returned = sorted(set(airflow_txn._LAZY) - set(first) - set(airflow_txn.OPTIONS))
    core = [f"{airflow_txn._LAZY[name]}.{name}" for name in first + returned]
    groups = [f"airflow_txn.core.warehouse_groups.{name}" for name in ("Maintenance", "Tags")]  # wh.maintenance, .tags
    options = [f"{module}.{name}" for name, module in airflow_txn.OPTIONS.items()]
    constants = [f"airflow_txn.model.csn.{name}" for name in airflow_txn.__all__ if name.endswith("_CSN")]
    spark = [f"{airflow_txn.spark._EXPORTS[name]}.{name}" for name in airflow_txn.spark.__all__
             if name not in airflow_txn.OPTIONS]  # Via and WriteMode: on the core's page
    checks = [f"{getattr(airflow_txn.checks, name).__module__}.{name}" for name in airflow_txn.checks.__all__
              if callable(getattr(airflow_txn.checks, name))]  # the classes and functions (not CHECK_TYPES)
    decorators = [d["class-name"] for d in provider.get_provider_info()["task-decorators"]]
    by_kind = [(kind.value.capitalize() + "s", [public.class_path(p.name) for p in public.of_kind(kind)])
               for kind in public.Kind]
    by_kind.insert(1, ("Task decorators", decorators))
    return {
        "api/index.md": API_INDEX,
        "api/core.md": _page("Core: import airflow_txn", "Imports neither Airflow nor Spark.",
                             [("", core[:2]), ("Warehouse groups", groups), ("Results", core[2:]),
                              ("Options", options), ("Constants", constants)]),
        "api/errors.md": _page("Errors: airflow_txn.errors", "Every error is a `TxnError`.",
                               [("", ["airflow_txn.errors"])]),
        "api/spark.md": _page("Spark: import airflow_txn.spark", "Needs the `spark` extra. `mode` and `via` are the "
                              "options `WriteMode` and `Via` ([Core](core.md#options)).", [("", spark)]),
        "api/checks.md": _page("Checks: airflow_txn.checks", "Write-audit-publish (CONCEPTS.md). DuckDB (the `checks` "
                               "or `airflow` extra) evaluates them; `airflow_txn.spark.checks.SparkEngine` with Spark.",
                               [("", checks)]),
        "api/airflow.md": _page(
            "Airflow: operators, sensors, hooks, triggers, decorators",
            "Operators import from `airflow_txn.operators`, sensors from `airflow_txn.sensors`, every name from "
            "`airflow_txn.airflow`; each is shown at its home module. The task decorators are `@task.txn_spark`, "
            "`@task.txn`, `@task.txn_read` and `@task.txn_check`. Needs the `airflow` extra.",
            [(heading, names) for heading, names in by_kind if names]),
    }


_command: list[str] = []


def on_startup(command: str, dirty: bool) -> None:
    _command[:] = [command]


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    urls = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["urls"]
    checked = {"repo_url": "Source", "site_url": "Documentation"}
    if _command == ["serve"]:  # `mkdocs serve` sets site_url to its own address
        del checked["site_url"]
    for key, name in checked.items():
        if (config[key] or "").rstrip("/") != urls[name].rstrip("/"):
            log.warning(f"mkdocs.yml's {key} {config[key]!r} is not pyproject.toml's {name} URL {urls[name]!r}")
    config.markdown_extensions.append(_RepositoryLinks(config.repo_url or ""))
    return config


def on_files(files: Files, config: MkDocsConfig) -> Files:
    for site, repo in REPOSITORY_PAGES.items():
        files.append(File.generated(config, site, content=(REPO / repo).read_text(encoding="utf-8")))
    for path, content in api_pages().items():
        files.append(File.generated(config, path, content=content))
    return files


@dataclass
class _Rendering:
    """The page being rendered (MkDocs renders one page at a time)."""

    site: str = ""
    """Its path on the site (relative to docs/)."""
    repo: str = ""
    """Its path in the repository, which its links are relative to."""
    files: Files | None = None


_rendering = _Rendering()


def on_page_markdown(markdown_text: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    _rendering.site = page.file.src_uri
    _rendering.repo = REPOSITORY_PAGES.get(page.file.src_uri, f"{DOCS}/{page.file.src_uri}")
    _rendering.files = files
    return markdown_text


def site_path(repo_path: str, files: Files) -> str | None:
    """The site path of a file of the repository, when the site has it."""
    for site, repo in REPOSITORY_PAGES.items():
        if repo_path == repo:
            return site
    if repo_path.startswith(DOCS + "/") and files.get_file_from_path(repo_path[len(DOCS) + 1:]) is not None:
        return repo_path[len(DOCS) + 1:]
    return None


def rewrite(url: str, repo_url: str, files: Files, *, image: bool) -> str:
    """A relative link of the page being rendered as the site needs it (unchanged unless it leaves docs/)."""
    parts = urlsplit(url)
    if parts.scheme or parts.netloc or url.startswith(("/", "#")) or not parts.path:
        return url
    target = posixpath.normpath(posixpath.join(posixpath.dirname(_rendering.repo), parts.path))
    anchor = f"#{parts.fragment}" if parts.fragment else ""
    on_site = site_path(target, files)
    if on_site is not None:
        return posixpath.relpath(on_site, posixpath.dirname(_rendering.site) or ".") + anchor
    local = REPO / target
    if image or target.startswith("..") or not local.exists():
        return url  # MkDocs reports it as not found
    kind = "tree" if local.is_dir() else "blob"
    return f"{repo_url.rstrip('/')}/{kind}/{BRANCH}/{target}{anchor}"


class _RepositoryLinks(markdown.Extension):
    """Rewrites the links of a page after Markdown made them, before MkDocs resolves and checks them."""

    def __init__(self, repo_url: str) -> None:
        super().__init__()
        self.repo_url = repo_url

    def extendMarkdown(self, md: markdown.Markdown) -> None:
        # the inline patterns make the links at priority 20; MkDocs checks them at 0
        md.treeprocessors.register(_LinkTreeprocessor(md, self.repo_url), "airflow_txn_repository_links", 10)


class _LinkTreeprocessor(markdown.treeprocessors.Treeprocessor):
    def __init__(self, md: markdown.Markdown, repo_url: str) -> None:
        super().__init__(md)
        self.repo_url = repo_url

    def run(self, root: ElementTree.Element) -> None:
        if _rendering.files is None:
            return
        for element in root.iter():
            key = {"a": "href", "img": "src"}.get(element.tag)
            url = element.get(key) if key else None
            if key and url:
                element.set(key, rewrite(url, self.repo_url, _rendering.files, image=element.tag == "img"))


class InheritedKeywords(griffe.Extension):
    """A Griffe extension (mkdocs.yml loads it): the constructor of a class that passes `**kwargs` to its base
    shows the base's keyword arguments too (SparkTransactionOperator: `tid`, `python_callable`, ... `conn_id`),
    so the signature says what the class takes and a docstring's `:param conn_id:` names a real parameter."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        for cls in _classes(pkg):
            init = cls.members.get("__init__")
            if not isinstance(init, griffe.Function) or not _takes_kwargs(init):
                continue
            own = [p for p in init.parameters if p.kind is not griffe.ParameterKind.var_keyword]
            names = {p.name for p in init.parameters}
            inherited: list[griffe.Parameter] = []
            for base in _bases(cls):
                base_init = base.members.get("__init__")
                if not isinstance(base_init, griffe.Function):
                    continue
                for p in base_init.parameters:
                    if p.name not in names and p.name != "self" and p.kind in _NAMED:
                        names.add(p.name)
                        inherited.append(griffe.Parameter(p.name, annotation=p.annotation, default=p.default,
                                                          kind=griffe.ParameterKind.keyword_only))
            if inherited:
                star = [p for p in init.parameters if p.kind is griffe.ParameterKind.var_keyword]
                init.parameters = griffe.Parameters(*own, *inherited, *star)


_NAMED = (griffe.ParameterKind.positional_or_keyword, griffe.ParameterKind.keyword_only)


def _takes_kwargs(function: griffe.Function) -> bool:
    return any(p.kind is griffe.ParameterKind.var_keyword for p in function.parameters)


def _classes(obj: griffe.Object) -> list[griffe.Class]:
    found: list[griffe.Class] = []
    for member in obj.members.values():
        if member.is_alias:
            continue
        if isinstance(member, griffe.Class):
            found.append(member)
        if isinstance(member, griffe.Module | griffe.Class):
            found += _classes(member)
    return found


def _bases(cls: griffe.Class) -> list[griffe.Class]:
    """The classes of the package that `cls` inherits from, nearest first (one outside it ends the walk)."""
    try:
        return cls.mro()
    except (griffe.AliasResolutionError, griffe.CyclicAliasError, ValueError):
        return []
