import json
from pathlib import Path

OUT = Path("/app/out")
LOW_STOCK = [
    {"sku": "SKU-4957", "name": "spade mini", "qty": 0},
    {"sku": "SKU-9932", "name": "rake pro", "qty": 0},
    {"sku": "SKU-1501", "name": "hammer xl", "qty": 1},
    {"sku": "SKU-8579", "name": "spade pro", "qty": 1},
    {"sku": "SKU-2677", "name": "spade pro", "qty": 2},
    {"sku": "SKU-4281", "name": "rake pro", "qty": 2},
    {"sku": "SKU-4769", "name": "kettle pro", "qty": 2},
    {"sku": "SKU-5189", "name": "spade xl", "qty": 2},
    {"sku": "SKU-6744", "name": "lantern pro", "qty": 2},
    {"sku": "SKU-3659", "name": "drill classic", "qty": 3},
    {"sku": "SKU-4305", "name": "hammer xl", "qty": 3},
    {"sku": "SKU-5829", "name": "kettle xl", "qty": 4},
    {"sku": "SKU-7940", "name": "spade pro", "qty": 4},
]
VALUE_BY_TAG = {"garden": 5150.19, "hardware": 859.74, "kitchen": 399.7, "outdoor": 89.2, "tools": 19.73}


def load(name):
    path = OUT / name
    assert path.is_file(), f"{path} is missing"
    return json.loads(path.read_text())


def test_low_stock():
    assert load("low_stock.json") == LOW_STOCK


def test_value_by_tag():
    data = load("value_by_tag.json")
    assert set(data) == set(VALUE_BY_TAG)
    for tag, total in VALUE_BY_TAG.items():
        assert isinstance(data[tag], (int, float)), f"{tag}: not a number"
        assert abs(data[tag] - total) < 0.005, f"{tag}: {data[tag]} != {total}"
