def apply_discount(price: float, percent: float) -> float:
    if not 0 <= percent <= 100:
        raise ValueError(f"percent must be between 0 and 100, not {percent}")
    return round(price * (1 - percent / 100), 2)


def bulk_price(unit_price: float, quantity: int, tiers: dict[int, float] | None = None) -> float:
    tiers = tiers or {10: 5.0, 100: 12.5}
    percent = max((p for minimum, p in tiers.items() if quantity >= minimum), default=0.0)
    return apply_discount(unit_price * quantity, percent)


def parse_sku(sku: str) -> tuple[str, int]:
    """Split a SKU such as "BOLT-0042" into its family and number."""
    family, _, number = sku.partition("-")
    return family.upper(), int(number)
