"""The binding's exceptions and the core's error messages.

The core returns an error code and a detail value (errorDetail()); the message is the template from spec/abi.json
(generated into _abi.py) with {detail} written as JavaScript's String(number) writes it, so every host prints the
same text for the same failure.
"""
from __future__ import annotations

import math

from . import _abi


class DolphinError(Exception):
    """Base class of every error this package raises."""


class CoreError(DolphinError):
    """The core refused a call: `code` is the spec's error code, `detail` the value or index it was about."""

    def __init__(self, code: int, detail: float, context: str | None = None) -> None:
        message = core_error_message(code, detail)
        super().__init__(f"{context}: {message}" if context else message)
        self.code = code
        self.detail = detail
        self.name = _abi.ERROR_MESSAGES[code][0] if code in _abi.ERROR_MESSAGES else "UNKNOWN"


class TableError(CoreError):
    """The core's table decoder rejected a table file; `field` names the failing field (e.g. "bits[2]")."""

    def __init__(self, field: str, message: str, detail: float = 0.0) -> None:
        DolphinError.__init__(self, message)
        self.code = _abi.E_BAD_TABLE
        self.detail = detail
        self.name = "BAD_TABLE"
        self.field = field


class RequestError(DolphinError, ValueError):
    """A call's arguments were refused before reaching the core (same messages as the Node host)."""


class WorkerError(DolphinError, KeyError):
    """An unknown or duplicate worker name."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


def js_number(x: float) -> str:
    """x as JavaScript's String(x) writes it (Number::toString, ECMA-262 §6.1.6.1.20).

    Python's repr gives the same shortest round-trip digits; only the layout differs (JS writes 1e21 but
    100000000000000000000 for 1e20, and 1e-7 but 0.000001 for 1e-6).
    """
    x = float(x)
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0:
        return "0"
    sign = "-" if x < 0 else ""
    text = repr(abs(x))
    mantissa, _, exp_text = text.partition("e")
    exponent = int(exp_text) if exp_text else 0
    whole, _, fraction = mantissa.partition(".")
    all_digits = whole + fraction
    digits = all_digits.lstrip("0")
    # value = 0.digits × 10^n; each leading zero dropped moves the point one place
    n = len(whole) + exponent - (len(all_digits) - len(digits))
    digits = digits.rstrip("0") or "0"
    k = len(digits)
    if k <= n <= 21:
        return sign + digits + "0" * (n - k)
    if 0 < n <= 21:
        return sign + digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return sign + "0." + "0" * (-n) + digits
    e = n - 1
    exp_part = f"e{'+' if e >= 0 else '-'}{abs(e)}"
    return sign + (digits if k == 1 else digits[0] + "." + digits[1:]) + exp_part


def core_error_message(code: int, detail: float) -> str:
    """The message for a core error code: the by_detail entry for this exact detail, else the template."""
    entry = _abi.ERROR_MESSAGES.get(code)
    detail_text = js_number(detail)
    if entry is None or code == 0:
        return f"core: error {code} (detail {detail_text})"
    _, template, by_detail = entry
    if by_detail is not None and detail_text in by_detail:
        template = by_detail[detail_text]
    return template.replace("{detail}", detail_text)
