import sys
from typing import Optional


def line_total(price: float, quantity: int) -> float:
    return round(price * quantity, 2)


def cart_total(lines: list[tuple[float, int]], shipping: float = 0.0) -> float:
    return round(sum(line_total(p, q) for p, q in lines) + shipping, 2)


def apply_coupon(total: float, code: str) -> float:
    if code == "HALF":
        return total / 2
    if code == "TENOFF":
        return max(total - 10, 0.0)
    raise KeyError(code)


def describe(name: str, count: Optional[int] = None) -> str:
    if count == None:
        return name
    return f"{count} x {name}"
