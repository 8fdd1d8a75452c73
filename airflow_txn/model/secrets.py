"""Masking secrets out of any text shown to a person: the one helper every message, log line and page uses.

A URL or connection string can carry a secret in several places, and `mask_secrets` hides each, keeping the
rest (what a person needs to tell which server was meant):

- the userinfo password of a URL: `postgresql://etl:PW@db/c` -> `postgresql://etl:***@db/c`;
- a parameter whose name says secret: `?password=`, `passwd`, `sslpassword`, `secret`, `token`, `access_key`,
  `secret_access_key`, `session_token`, `X-Amz-Security-Token`, a signature, ... in a query string (`&`), in
  Spark Connect's `sc://host:port/;token=...`, and in libpq's `key=value` strings (`host=db password=x`,
  a quoted value included);
- the same names as keys of a JSON or Python mapping shown as text (`"secret_access_key": "..."`).

Everything else is kept as written (`options=-c search_path=x`, `sslmode`, `user_id`, an access key's id).
Masking is idempotent: a masked text masks to itself. Pure Python: every layer may use it.
"""

from __future__ import annotations

import re

MASK = "***"

_EXACT = frozenset({"pwd", "passwd", "password", "secret", "token", "auth", "sig", "apikey", "credentials"})
_SUFFIXES = ("password", "passwd", "secret", "token", "secret_key", "access_key", "signature", "api_key",
             "private_key", "passphrase")

_USERINFO = re.compile(r"(?P<head>\b[A-Za-z][A-Za-z0-9+.-]*://[^\s:/?#@]*):(?P<secret>[^\s/?#]+)@")
_KEY_VALUE = re.compile(
    r"(?<![\w.-])(?P<key>[A-Za-z_][\w.-]*)(?P<sep>[ \t]*=[ \t]*)"
    r"(?P<secret>'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|[^\s&;,'\"]+)")
_MAPPING = re.compile(r"(?P<q>[\"'])(?P<key>[^\"'\s]+)(?P=q)(?P<sep>\s*:\s*)(?P<secret>\"(?:[^\"\\]|\\.)*\"|"
                      r"'(?:[^'\\]|\\.)*')")


def is_secret_name(name: str) -> bool:
    """Whether a parameter, option or key of this name holds a secret (`password`, `X-Amz-Security-Token`)."""
    key = name.lower().replace("-", "_")
    return key in _EXACT or key.endswith(_SUFFIXES)


def mask_secrets(text: str) -> str:
    """`text` with every secret a URL, a connection string or a shown mapping carries replaced by `***`."""
    text = _USERINFO.sub(lambda m: f"{m['head']}:{MASK}@", text)
    text = _KEY_VALUE.sub(_masked_pair, text)
    return _MAPPING.sub(_masked_item, text)


def _masked_pair(match: re.Match[str]) -> str:
    if not is_secret_name(match["key"]) or match["secret"] == MASK:
        return match[0]
    return f"{match['key']}{match['sep']}{MASK}"


def _masked_item(match: re.Match[str]) -> str:
    if not is_secret_name(match["key"]):
        return match[0]
    quote = match["secret"][0]
    return f"{match['q']}{match['key']}{match['q']}{match['sep']}{quote}{MASK}{quote}"
