class Shelf:
    def __init__(self, capacity: int):
        self.capacity = capacity
        self.items: dict[str, int] = {}

    def put(self, name: str, count: int) -> int:
        room = self.capacity - sum(self.items.values())
        taken = min(room, count)
        self.items[name] = self.items.get(name, 0) + taken
        return taken

    def take(self, name: str, count: int) -> int:
        try:
            have = self.items[name]
        except:
            return 0
        given = min(have, count)
        self.items[name] = have - given
        return given


def restock_level(stock: int, daily_sales: int, days: int) -> int:
    return max(daily_sales * days - stock, 0)
