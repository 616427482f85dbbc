"""A small generated service manual (Markdown, one page per section) with distinct topics, for
retrieval and relevance tests on the real built-in embedder."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

SECTIONS = {
    "Replacing the air filter": (
        "The air filter keeps dust out of the compressor. Replace it every 500 operating hours, "
        "or sooner in dusty workshops. Switch the unit off and unplug it. Open the grey side "
        "cover by turning its two thumb screws a quarter turn. Pull the old filter cartridge "
        "straight out of its slot and dispose of it. Slide in a new cartridge, part number "
        "FC-2290, with the arrow on its frame pointing towards the fan. Close the cover and "
        "tighten the thumb screws. Reset the filter hour counter in the service menu."
    ),
    "Alarm codes": (
        "When the display shows alarm A-17, the coolant temperature has passed 85 degrees and "
        "the compressor has shut itself down to protect the motor. Let the unit cool for thirty "
        "minutes and make sure the vents are not blocked. Then press and hold the RESET key for "
        "five seconds until the red lamp goes out. If A-17 returns within an hour, the coolant "
        "pump is probably worn. Alarm A-22 means the door switch is open; close the door firmly."
    ),
    "Calibrating the pressure sensor": (
        "The pressure sensor drifts slowly over time, so its readings should be checked against "
        "a reference gauge once a year. Connect the reference gauge to the test port on the "
        "manifold. Enter the service menu, choose Sensors, then Pressure, then Calibrate. Vent "
        "the line to atmosphere and confirm the zero point. Then pressurise the line to 6 bar "
        "and enter the value the reference gauge shows. The controller stores the new offset "
        "and gain and prints a calibration report."
    ),
    "Cleaning the water tank": (
        "Condensed water collects in the tank at the bottom of the unit. Drain it every week "
        "through the brass drain valve. Once a month, remove the tank, rinse it with warm "
        "water and a mild detergent, and let it dry completely before refitting it. Never use "
        "solvents, which attack the plastic seals."
    ),
    "Warranty and service contact": (
        "The warranty covers defects in materials and workmanship for two years from the date "
        "of purchase. Keep the invoice. To arrange a repair, call the service hotline or write "
        "to the address on the back cover, quoting the serial number printed on the rating "
        "plate next to the mains socket."
    ),
}

MANUAL_NAME = "compressor-manual.md"


def write_manual(folder: Path) -> Path:
    """The manual as a Markdown file in `folder`; each section becomes one page."""
    folder.mkdir(parents=True, exist_ok=True)
    text = "# Compressor service manual\n\n" + "\n\n".join(
        f"## {heading}\n\n{body}\n" for heading, body in SECTIONS.items())
    path = folder / MANUAL_NAME
    path.write_text(text, encoding="utf-8")
    return path


@contextmanager
def indexed_manual(root: Path) -> Iterator[tuple]:
    """(store, embedder, {section heading: page number}): the manual indexed with the built-in
    embedder in a data dir under `root`. The embedder needs no prepared LLM."""
    from engine.ingest.text import parse_markdown
    from engine.paths import AppPaths
    from engine.store.indexer import Indexer, IndexSettings, default_embedder, open_collection

    paths = AppPaths(root / "data").ensure()
    embedder = default_embedder(paths)
    manual = write_manual(root / "docs")
    pages = {page.label.rsplit(" > ", 1)[-1]: page.number for page in parse_markdown(manual).pages}
    with open_collection(paths, "default", embedder) as store:
        events = list(Indexer(store, embedder, IndexSettings(parse_time_limit_s=60)).run([manual]))
        if events[-1].outcome.status != "ready":
            raise AssertionError(f"the manual was not indexed: {events[-1].outcome}")
        yield store, embedder, pages
