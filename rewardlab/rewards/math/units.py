"""Physical units written after an answer ("5 cm", "180 \\text{ minutes}").

A unit is dropped when only one side states one (the number is read in the other side's unit),
but when both sides state units of the same dimension they are converted before comparing, so
"50 mm" matches "5 cm" and "125 km" does not match "125 miles".
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction


@dataclass(frozen=True, slots=True)
class Unit:
    dimension: str
    #: How many base units (m, s, g, L) one of this unit is.
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
    add("time", Fraction(1), "s", "sec", "secs", "second", "seconds")
    add("time", Fraction(60), "min", "mins", "minute", "minutes")
    add("time", Fraction(3600), "h", "hr", "hrs", "hour", "hours")
    add("time", Fraction(86400), "day", "days")
    add("time", Fraction(604800), "wk", "wks", "week", "weeks")
    # A Julian year; a month is a twelfth of it ("12 months" = "1 year"; "52 weeks" is not).
    add("time", Fraction(31557600), "yr", "yrs", "year", "years")
    add("time", Fraction(31557600, 12), "month", "months")
    add("mass", Fraction(1, 1000), "mg", "milligram", "milligrams")
    add("mass", Fraction(1), "g", "gram", "grams")
    add("mass", Fraction(1000), "kg", "kilogram", "kilograms")
    add("volume", Fraction(1, 1000), "ml", "mL", "milliliter", "milliliters", "millilitre", "millilitres")
    add("volume", Fraction(1), "l", "L", "liter", "liters", "litre", "litres")
    # Money in one currency's units: "5.4 dollars" is not "5.4 cents". A bare "$" is dropped
    # with the other delimiters, so "$18" and "18 dollars" both read as 18.
    add("money", Fraction(1), "dollar", "dollars", "usd", "USD")
    add("money", Fraction(1, 100), "cent", "cents")
    return {name: Unit(dimension, scale) for name, (dimension, scale) in table.items()}


UNITS = _units()
#: Degrees Celsius and Fahrenheit are different scales, converted by no factor: kept apart.
CELSIUS = Unit("temperature (Celsius)", Fraction(1))
FAHRENHEIT = Unit("temperature (Fahrenheit)", Fraction(1))
# A known unit at the very end, after a number, a closing bracket or a space.
_TRAILING_UNIT = re.compile(
    r"(?<=[\d})\s])\s*(?P<unit>" + "|".join(sorted(map(re.escape, UNITS), key=len, reverse=True)) + r")\.?$"
)


_COMMAND = re.compile(r"\\[a-zA-Z]+")


def split_unit(text: str) -> tuple[str, Unit | None]:
    """The text without a trailing known unit, and that unit.

    Only a quantity without variables gets a unit: in "3x + 2m" the m is a variable.
    """
    match = _TRAILING_UNIT.search(text)
    if match is None:
        return text, None
    quantity = text[: match.start()].rstrip()
    if not quantity or re.search(r"[a-zA-Z]", _COMMAND.sub("", quantity)):
        return text, None
    return quantity, UNITS[match.group("unit")]
