def slugify(title: str) -> str:
    return "-".join(title.lower().split())


def clamp(value: int, low: int, high: int) -> int:
    return max(low, min(value, high))


def initials(full_name: str) -> str:
    return "".join(part[0].upper() for part in full_name.split())


def pad_left(text: str, width: int, fill: str = " ") -> str:
    l = len(text)
    return fill * max(width - l, 0) + text


def count_words(text, ignore=[]):
    return len([word for word in text.split() if word not in ignore])
