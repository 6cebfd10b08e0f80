def format_line(name, count, width=20):
    return f"{name:<{width}}{count:>6}"


def render(stock, tags=[]):
    lines = [format_line(name, count) for name, count in sorted(stock.items.items())]
    print("\n".join(lines))
    return lines
