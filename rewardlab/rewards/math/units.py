"""Physical units and currencies written after an answer ("5 cm", "180 \\text{ minutes}", "£10").

A unit is dropped when only one side states one (the number is read in the other side's unit),
but when both sides state units they are converted before comparing, so "50 mm" matches "5 cm"
and "125 km" does not match "125 miles". Units of different dimensions never match: "10 square
feet" is not "10 feet", "10 per week" is not "10 per day", "10¢" is not "$10", and "£10" is not
"$10" (currencies are kept apart: no exchange rate is a fact).

A unit is read as ``[square|cubic] name[^2|^3] [per|/ name]`` at the end of the answer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction


@dataclass(frozen=True, slots=True)
class Unit:
    dimension: str
    #: How many base units (m, s, g, L, or one of the currency) one of this unit is.
    scale: Fraction


def _units() -> dict[str, Unit]:
    table: dict[str, tuple[str, Fraction]] = {}

    def add(dimension: str, scale: Fraction, *names: str) -> None:
        for name in names:
            table[name] = (dimension, scale)

    add("length", Fraction(1, 1000), "mm", "millimeter", "millimeters", "millimetre", "millimetres")
    add("length", Fraction(1, 100), "cm", "centimeter", "centimeters", "centimetre", "centimetres")
    add("length", Fraction(1), "m", "meter", "meters", "metre", "metres")
    add("length", Fraction(1000), "km", "kilometer", "kilometers", "kilometre", "kilometres")
    add("length", Fraction(254, 10000), "in", "inch", "inches")
    add("length", Fraction(3048, 10000), "ft", "foot", "feet")
    add("length", Fraction(9144, 10000), "yd", "yard", "yards")
    add("length", Fraction(1609344, 1000), "mi", "mile", "miles")
    add("time", Fraction(1, 1000), "ms", "millisecond", "milliseconds")
    add("time", Fraction(1), "s", "sec", "secs", "second", "seconds")
    add("time", Fraction(60), "min", "mins", "minute", "minutes")
    add("time", Fraction(3600), "h", "hr", "hrs", "hour", "hours")
    add("time", Fraction(86400), "day", "days")
    add("time", Fraction(604800), "wk", "wks", "week", "weeks")
    # A Julian year; a month is a twelfth of it ("12 months" = "1 year"; "52 weeks" is not).
    add("time", Fraction(31557600), "yr", "yrs", "year", "years")
    add("time", Fraction(31557600, 12), "month", "months")
    add("time", Fraction(315576000), "decade", "decades")
    add("time", Fraction(3155760000), "century", "centuries")
    add("mass", Fraction(1, 1000), "mg", "milligram", "milligrams")
    add("mass", Fraction(1), "g", "gram", "grams")
    add("mass", Fraction(1000), "kg", "kilogram", "kilograms")
    add("mass", Fraction(1000000), "tonne", "tonnes", "metric ton", "metric tons")
    # The US short ton and the avoirdupois pound and ounce ("pounds" is weight; "£" is money).
    add("mass", Fraction(90718474, 100), "ton", "tons")
    add("mass", Fraction(45359237, 100000), "lb", "lbs", "pound", "pounds")
    add("mass", Fraction(28349523125, 10**9), "oz", "ounce", "ounces")
    add("volume", Fraction(1, 1000), "ml", "mL", "milliliter", "milliliters", "millilitre", "millilitres")
    add("volume", Fraction(1), "l", "L", "liter", "liters", "litre", "litres")
    add("volume", Fraction(3785411784, 10**9), "gal", "gallon", "gallons")
    # Money in one currency's units: "5.4 dollars" is not "5.4 cents". A bare "$" is dropped
    # with the other delimiters, so "$18" and "18 dollars" both read as 18.
    add("money (USD)", Fraction(1), "dollar", "dollars", "usd", "USD")
    add("money (USD)", Fraction(1, 100), "cent", "cents", "¢", "penny", "pennies")
    add("money (USD)", Fraction(1, 20), "nickel", "nickels")
    add("money (USD)", Fraction(1, 10), "dime", "dimes")
    add("money (USD)", Fraction(1, 4), "quarter", "quarters")
    add("money (GBP)", Fraction(1), "£", "GBP", "pound sterling", "pounds sterling")
    add("money (GBP)", Fraction(1, 100), "pence")
    add("money (EUR)", Fraction(1), "€", "euro", "euros", "EUR")
    add("money (JPY)", Fraction(1), "¥", "yen", "JPY")
    add("money (INR)", Fraction(1), "₹", "rupee", "rupees", "INR")
    return {name: Unit(dimension, scale) for name, (dimension, scale) in table.items()}


UNITS = _units()
#: Degrees Celsius and Fahrenheit are different scales, converted by no factor: kept apart.
CELSIUS = Unit("temperature (Celsius)", Fraction(1))
FAHRENHEIT = Unit("temperature (Fahrenheit)", Fraction(1))
_NAMES = "|".join(sorted(map(re.escape, UNITS), key=len, reverse=True))
_POWER_WORDS = {"square": 2, "sq": 2, "sq.": 2, "cubic": 3, "cu": 3, "cu.": 3}
# A unit at the very end, after a number, a closing bracket or a space: "5 cm", "5 sq ft",
# "5 cm^2", "5 km/h", "5 dollars per hour", "5 per week".
_TRAILING_UNIT = re.compile(
    r"(?<=[\d})\s])\s*(?:(?:(?P<power>square|sq\.?|cubic|cu\.?)\s+)?(?P<unit>" + _NAMES + r")(?![a-zA-Z])"
    r"(?:\s*\^\s*\{?\s*(?P<exponent>[23])\s*\}?)?)?"
    r"(?:\s*(?:\bper\b|/)\s*(?P<per>" + _NAMES + r"))?\.?$"
)
# A currency sign before the amount: "£10", "-€5".
_CURRENCY_BEFORE = re.compile(r"^(-?)\s*([£€¥₹])\s*(?=\d)")
_COMMAND = re.compile(r"\\[a-zA-Z]+")


def _powered(unit: Unit, power: int) -> Unit:
    return unit if power == 1 else Unit(f"{unit.dimension}^{power}", unit.scale**power)


def split_unit(text: str) -> tuple[str, Unit | None]:
    """The text without a trailing unit (or a leading currency sign), and that unit.

    Only a quantity without variables gets a unit: in "3x + 2m" the m is a variable.
    """
    currency = _CURRENCY_BEFORE.match(text)
    if currency is not None:
        rest = currency.group(1) + text[currency.end() :]
        if not re.search(r"[a-zA-Z]", _COMMAND.sub("", rest)):
            return rest.strip(), UNITS[currency.group(2)]
    match = _TRAILING_UNIT.search(text)
    if match is None or (match.group("unit") is None and match.group("per") is None):
        return text, None
    quantity = text[: match.start()].rstrip()
    if not quantity or re.search(r"[a-zA-Z]", _COMMAND.sub("", quantity)):
        return text, None
    unit = Unit("count", Fraction(1))
    if match.group("unit") is not None:
        power = _POWER_WORDS.get((match.group("power") or "").lower(), int(match.group("exponent") or 1))
        unit = _powered(UNITS[match.group("unit")], power)
    if match.group("per") is not None:
        per = UNITS[match.group("per")]
        unit = Unit(f"{unit.dimension}/{per.dimension}", unit.scale / per.scale)
    return quantity, unit
