"""Prints pyproject.toml's dependencies for the server image: all but the window's (PySide6).

The server, the CLI and the engine never import Qt; leaving it out keeps ~600 MB out of the image.
Read from pyproject.toml so that the image follows the project's own version ranges.
"""

import sys
import tomllib

WINDOW_ONLY = {"pyside6"}


def main(pyproject: str) -> None:
    with open(pyproject, "rb") as f:
        dependencies = tomllib.load(f)["project"]["dependencies"]
    for requirement in dependencies:
        name = requirement.split(";")[0]
        for mark in "<>=!~[ ":
            name = name.split(mark)[0]
        if name.strip().lower() not in WINDOW_ONLY:
            print(requirement)


if __name__ == "__main__":
    main(sys.argv[1])
