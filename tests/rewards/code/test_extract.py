from rewardlab.rewards.code.extract import extract_program

TEXT = """Draft:
```python
def f(): return 1
```
Better:
```py solution.py
def f():
    return 2
```
```bash
echo hi
```
"""


def test_block_choices():
    assert extract_program(TEXT).source == "def f():\n    return 2\n"
    assert extract_program(TEXT, block="first").source == "def f(): return 1\n"
    assert extract_program(TEXT, block="longest").source == "def f():\n    return 2\n"
    assert extract_program(TEXT, block="all").source.count("def f") == 2
    assert extract_program(TEXT, block="first", block_name="solution.py").method == "named_block"


def test_other_languages_and_unfenced():
    assert extract_program("```bash\nls\n```").source is None
    assert extract_program("print(1)").source is None
    assert extract_program("print(1)", allow_unfenced=True).source == "print(1)"
    assert extract_program("~~~python\nprint(2)\n~~~").source == "print(2)\n"
