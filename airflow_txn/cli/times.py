"""How the CLI writes and reads times, with pendulum: in tables a moment is ISO 8601 with its zone offset
(local time, to the second) and a span of seconds is in words (`1 hour 30 minutes`); in JSON a moment
is ISO 8601 in UTC (`2026-11-24T21:10:05.250000Z`, to the microsecond: airflow_txn/model/moments.py, which
the Transactions page's JSON API shares) and a span stays a number of seconds. On the command line a
duration is seconds (`3600`), a number with a unit (`45s`, `30m`, `12h`, `7d`, `2w`, or several: `1h30m`) or
ISO 8601 (`PT1H`, `P7D`), and where an option allows it a point in
time (`2026-01-01T00:00:00Z`; without an offset it is local time) stands for the span from then until now.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable

import click
import pendulum

_MINUTE = 60.0
_LOCAL = "local"  # pendulum's name of the local zone
_OR_MOMENT = {False: "", True: " or a point in time"}
_UNIT_SECONDS = {"w": 7 * 86400.0, "d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0}
_WITH_UNITS = re.compile(r"(?:\d+(?:\.\d+)?[wdhms])+")
_ONE_UNIT = re.compile(r"(\d+(?:\.\d+)?)([wdhms])")
_FORMS = "seconds (3600), a number with a unit (45s, 30m, 12h, 7d, 1h30m) or ISO 8601 (PT1H, P7D)"


def moment(epoch: float) -> str:
    """An epoch (seconds) as ISO 8601 in the local zone, to the second: `2026-11-24T22:10:05+01:00`."""
    return pendulum.from_timestamp(math.floor(epoch), tz=_LOCAL).to_iso8601_string()


def relative(epoch: float) -> str:
    """How far a moment is from now, in words: `in 4 minutes`, `3 hours ago`."""
    return pendulum.from_timestamp(epoch).diff_for_humans()


def duration(seconds: float) -> str:
    """A span in words: `1 week`, `1 hour 30 minutes`; under a minute exact (`1.5 seconds`)."""
    if abs(seconds) < _MINUTE:
        return f"{seconds:g} second{'' if seconds == 1 else 's'}"
    return str(pendulum.duration(seconds=seconds).in_words())


def parse_seconds(text: str, since_allowed: bool = False) -> float:
    """Seconds from a number, a number with units (`7d`, `12h`, `30m`, `45s`, `2w`, `1h30m`), an ISO 8601
    duration, or (`since_allowed`) an ISO 8601 point in time, which stands for the seconds from then until
    now. ValueError when it is none of them."""
    try:
        return float(text)
    except ValueError:
        pass
    if _WITH_UNITS.fullmatch(text.strip()):
        return sum(float(number) * _UNIT_SECONDS[unit] for number, unit in _ONE_UNIT.findall(text))
    try:
        parsed = pendulum.parse(text.strip(), exact=True, tz=_LOCAL)
    except ValueError as exc:  # pendulum's ParserError is one
        raise ValueError(f"{text!r} is not a duration: give {_FORMS}{_OR_MOMENT[since_allowed]}") from exc
    if isinstance(parsed, pendulum.Duration):
        return float(parsed.total_seconds())
    if not since_allowed:
        raise ValueError(f"{text!r} is a point in time; give a duration: {_FORMS}")
    if isinstance(parsed, pendulum.Time):
        raise ValueError(f"{text!r} is a time of day; give a date and time (2026-01-01T00:00:00Z)")
    if not isinstance(parsed, pendulum.DateTime):  # a date: its midnight, local time
        parsed = pendulum.datetime(parsed.year, parsed.month, parsed.day, tz=_LOCAL)
    since = (pendulum.now() - parsed).total_seconds()
    if since < 0:
        raise ValueError(f"{text!r} is in the future; give a moment in the past")
    return float(since)


def duration_option(minimum: float = 0.0, since_allowed: bool = False,
                    maximum: float = math.inf) -> Callable[..., float | None]:
    """A click callback for an option of seconds that also takes units (`7d`, `12h`) and ISO 8601 durations
    (`PT1H`, `P7D`) and, with `since_allowed`, a point in time meaning "from then until now"; at least
    `minimum` seconds and at most `maximum`."""

    def convert(ctx: click.Context, param: click.Parameter, value: str | None) -> float | None:
        if value is None:
            return None
        try:
            seconds = parse_seconds(value, since_allowed)
        except ValueError as exc:
            raise click.BadParameter(str(exc), ctx=ctx, param=param) from exc
        if not math.isfinite(seconds) or not minimum <= seconds <= maximum:
            most = f" and at most {maximum:g} seconds" if math.isfinite(maximum) else ""
            raise click.BadParameter(f"{value!r} must be at least {minimum:g} seconds{most}", ctx=ctx, param=param)
        return seconds

    return convert
