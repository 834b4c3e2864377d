from pathlib import Path

GREETINGS = Path("/app/greetings")


def test_directory_exists():
    assert GREETINGS.is_dir(), "/app/greetings is missing"


def test_hello_content():
    path = GREETINGS / "hello.txt"
    assert path.is_file(), f"{path} is missing"
    assert path.read_bytes() == b"Hello, world!\n"


def test_goodbye_content():
    path = GREETINGS / "goodbye.txt"
    assert path.is_file(), f"{path} is missing"
    assert path.read_bytes() == b"Goodbye, world!\n"
