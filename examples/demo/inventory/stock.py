import json
import os


class Stock:
    def __init__(self, items={}):
        self.items = items

    def add(self, name, count):
        # TODO: reject negative counts
        self.items[name] = self.items.get(name, 0) + count

    def remove(self, name, count):
        try:
            self.items[name] -= count
        except:
            print("no such item", name)

    def total(self):
        return sum(self.items.values())


def load(path):
    with open(path) as handle:
        return Stock(json.load(handle))
