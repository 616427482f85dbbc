#!/usr/bin/env python
"""Guessing text encodings (issue 12): bytes that are not UTF-8, read by today's rule (UTF-8 with
U+FFFD for bad bytes), by charset-normalizer's best guess with its defaults, and by decode_text
as it is now (the guess limited to the encodings editors save in).

Texts: technician-style lines written for this bench (German, French, Spanish, Polish, Czech,
Russian, Greek, Japanese) and pages of the real manuals (tests/.manuals, through pypdf), encoded
in the legacy encodings their writers would use, at four lengths: one line, a paragraph, a page
(~3 KB) and a whole file (~40 KB). Only samples whose bytes are not valid UTF-8 are scored.

  exact      decoded text == the original; in brackets, where higher, equal after NFKC and
             the JIS variants (WAVE DASH vs FULLWIDTH TILDE, ...)
  lost       the original's non-ASCII characters missing from the result (a multiset)
  ms, MB/s   wall time per text and bytes per second (the machine is shared: read as ratios)

It also times 20 MB legacy files, checks that valid UTF-8 and pure ASCII come back unchanged
with no warning and without importing charset_normalizer, and times decode_text on them
against a bare bytes.decode("utf-8").

    python bench/bench_charset.py          # about a minute on 2 cores; tables on stdout
"""

from __future__ import annotations

import collections
import json
import logging
import random
import subprocess
import sys
import time
import unicodedata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import charset_normalizer  # noqa: E402

from engine.ingest.text import decode_text  # noqa: E402

MANUALS = ROOT / "tests" / ".manuals"
CACHE = ROOT / "bench" / ".cache" / "charset_manual_pages.json"
REAL_MANUALS = ("R-intro", "R-admin", "R-FAQ")
PAGES_PER_MANUAL = 30
PAGE_BYTES, FILE_BYTES = 3_000, 40_000

SNIPPETS = {
    "de": [
        "Überdruckventil prüfen: max. 5 bar.",
        "Vor dem Öffnen des Gehäuses Netzstecker ziehen.",
        "Dichtungen bei Verschleiß ersetzen.",
        "Fehler E42: Temperaturfühler lösen und prüfen.",
        "Schläuche auf Risse und Undichtigkeiten prüfen.",
        "Größe der Schraube: M6 × 20, Anzugsmoment 9 Nm.",
        "Die Pumpe läuft nach dem Einschalten nicht an.",
        "Filter wöchentlich reinigen, bei Bedarf austauschen.",
        "Temperatur über 80 °C: Gerät sofort abschalten.",
        "Ersatzdichtung „D-17“ kostet 12,50 € – nur Originalteile verwenden.",
    ],
    "fr": [
        "Vérifier la pression du circuit avant la mise en service.",
        "Débrancher l'appareil avant d'ouvrir le boîtier.",
        "Remplacer le joint d'étanchéité s'il est usé.",
        "Erreur E42 : la sonde de température est déconnectée.",
        "Nettoyer le filtre à air chaque semaine.",
        "Ne jamais dépasser 5 bar ; risque d'éclatement.",
        "Le ventilateur ne démarre pas après la mise sous tension.",
        "Contrôler l'état des câbles électriques.",
        "Le cœur du moteur doit être graissé tous les ans.",
        "Température maximale : 80 °C. Arrêter la machine immédiatement.",
    ],
    "es": [
        "Compruebe la presión de la válvula antes de arrancar.",
        "Desconecte el equipo antes de abrir la carcasa.",
        "Sustituya la junta si está desgastada.",
        "Error E42: el sensor de temperatura está desconectado.",
        "Limpie el filtro de aire cada semana.",
        "¿La bomba no arranca? Revise el fusible de 2 A.",
        "Nunca supere los 5 bar; riesgo de rotura.",
        "El mantenimiento debe realizarlo un técnico cualificado.",
        "Apriete los tornillos con una llave dinamométrica.",
        "Temperatura máxima: 80 °C. Apague la máquina de inmediato.",
    ],
    "pl": [
        "Sprawdź ciśnienie w układzie przed uruchomieniem.",
        "Odłącz urządzenie od zasilania przed otwarciem obudowy.",
        "Wymień uszczelkę, jeśli jest zużyta.",
        "Błąd E42: czujnik temperatury jest odłączony.",
        "Czyść filtr powietrza raz w tygodniu.",
        "Nie przekraczaj ciśnienia 5 bar; grozi to pęknięciem.",
        "Pompa nie uruchamia się po włączeniu zasilania.",
        "Konserwację może wykonywać wyłącznie wykwalifikowany technik.",
        "Dokręć śruby kluczem dynamometrycznym.",
        "Żółta dioda miga: sprawdź bezpiecznik.",
    ],
    "cs": [
        "Před otevřením krytu odpojte zařízení od sítě.",
        "Zkontrolujte tlak v okruhu před spuštěním.",
        "Vyměňte těsnění, pokud je opotřebované.",
        "Chyba E42: čidlo teploty je odpojeno.",
        "Vzduchový filtr čistěte jednou týdně.",
        "Nepřekračujte tlak 5 barů; hrozí roztržení.",
        "Čerpadlo se po zapnutí nespustí.",
        "Údržbu smí provádět pouze vyškolený technik.",
        "Šrouby utáhněte momentovým klíčem.",
        "Žlutá kontrolka bliká: zkontrolujte pojistku.",
    ],
    "ru": [
        "Проверьте давление в системе перед запуском.",
        "Отключите прибор от сети перед вскрытием корпуса.",
        "Замените уплотнение, если оно изношено.",
        "Ошибка E42: датчик температуры отключён.",
        "Очищайте воздушный фильтр раз в неделю.",
        "Не превышайте давление 5 бар: опасность разрыва.",
        "Насос не запускается после включения питания.",
        "Обслуживание выполняет только обученный техник.",
        "Затяните винты динамометрическим ключом.",
        "Жёлтый индикатор мигает: проверьте предохранитель.",
    ],
    "el": [
        "Ελέγξτε την πίεση του κυκλώματος πριν από την εκκίνηση.",
        "Αποσυνδέστε τη συσκευή πριν ανοίξετε το περίβλημα.",
        "Αντικαταστήστε τη φλάντζα αν είναι φθαρμένη.",
        "Σφάλμα E42: ο αισθητήρας θερμοκρασίας είναι αποσυνδεδεμένος.",
        "Καθαρίζετε το φίλτρο αέρα κάθε εβδομάδα.",
        "Μην υπερβαίνετε τα 5 bar: κίνδυνος θραύσης.",
        "Η αντλία δεν ξεκινά μετά την ενεργοποίηση.",
        "Η συντήρηση γίνεται μόνο από εκπαιδευμένο τεχνικό.",
        "Σφίξτε τις βίδες με δυναμόκλειδο.",
        "Η κίτρινη λυχνία αναβοσβήνει: ελέγξτε την ασφάλεια.",
    ],
    "ja": [
        "運転前に回路の圧力を確認してください。",
        "カバーを開ける前に電源プラグを抜いてください。",
        "パッキンが摩耗している場合は交換してください。",
        "エラーE42：温度センサーが外れています。",
        "エアフィルターは毎週清掃してください。",
        "5 barを超えないでください。破裂の危険があります。",
        "電源を入れてもポンプが起動しません。",
        "保守は訓練を受けた技術者のみが行ってください。",
        "ネジはトルクレンチで締めてください。",
        "黄色のランプが点滅〜ヒューズを点検してください。",
    ],
}
WESTERN = ("cp1252", "latin-1", "iso-8859-15")
ENCODINGS = {
    "de": WESTERN, "fr": WESTERN, "es": WESTERN, "en (manuals)": WESTERN,
    "pl": ("cp1250", "iso-8859-2"), "cs": ("cp1250", "iso-8859-2"),
    "ru": ("koi8-r", "cp1251"), "el": ("iso-8859-7",), "ja": ("shift_jis", "euc-jp"),
}
LENGTHS = ("line", "paragraph", "page", "file")
# The same character under two JIS mappings (Shift-JIS vs cp932 and friends)
JIS_VARIANTS = str.maketrans("\uff5e\u2225\uff0d\uffe0\uffe1\uffe2",
                             "\u301c\u2016\u2212\u00a2\u00a3\u00ac")


# -- texts --------------------------------------------------------------------------------
def manual_pages() -> dict[str, list[str]]:
    """Pages of the real manuals, extracted once and cached (pypdf takes a few seconds)."""
    if CACHE.exists():
        return json.loads(CACHE.read_text(encoding="utf-8"))
    import pypdf

    logging.getLogger("pypdf").setLevel(logging.ERROR)  # font warnings, not our concern
    pages = {}
    for name in REAL_MANUALS:
        reader = pypdf.PdfReader(MANUALS / f"{name}.pdf")
        count = min(PAGES_PER_MANUAL, len(reader.pages))
        pages[name] = [reader.pages[index].extract_text() for index in range(count)]
    CACHE.parent.mkdir(parents=True, exist_ok=True)
    CACHE.write_text(json.dumps(pages, ensure_ascii=False), encoding="utf-8")
    return pages


def english_lines(pages: dict[str, list[str]]) -> list[str]:
    return [line for page_list in pages.values() for page in page_list
            for line in page.splitlines() if line.strip()]


def written_texts(language: str, filler: list[str], rng: random.Random) -> dict[str, list[str]]:
    """Lines, paragraphs, pages and a file in `language`; longer texts take every third line
    from the real manuals, as manuals mix in commands, part numbers and English terms."""
    lines = SNIPPETS[language]
    paragraphs = [" ".join(lines[start:start + 4]) for start in range(0, 10, 2)]
    return {"line": list(lines), "paragraph": paragraphs,
            "page": [mixed_text(lines, filler, PAGE_BYTES, rng) for _ in range(3)],
            "file": [mixed_text(lines, filler, FILE_BYTES, rng)]}


def mixed_text(lines: list[str], filler: list[str], size: int, rng: random.Random) -> str:
    out, length = [], 0
    while length < size:
        line = rng.choice(filler) if len(out) % 3 == 2 else rng.choice(lines)
        out.append(line)
        length += len(line.encode("utf-8")) + 1
    return "\n".join(out) + "\n"


def manual_texts(pages: dict[str, list[str]]) -> dict[str, list[str]]:
    """The real manuals as they are: lines and five-line blocks that hold a non-ASCII
    character, pages, and each manual's extracted pages as one file."""
    all_pages = [page for page_list in pages.values() for page in page_list]
    lines = [line for line in english_lines(pages) if not line.isascii()]
    blocks = ["\n".join(page_lines[start:start + 5])
              for page_lines in (page.splitlines() for page in all_pages)
              for start in range(0, len(page_lines), 5)]
    paragraphs = [block for block in blocks if not block.isascii()]
    return {"line": lines[:60], "paragraph": paragraphs[:60], "page": all_pages,
            "file": ["\n".join(page_list) for page_list in pages.values()]}


def samples() -> list[tuple[str, str, str, str]]:
    """(language, encoding, length, text) for every text whose encoded bytes are not UTF-8.
    What an encoding cannot hold becomes "?", as a Windows editor saves it."""
    pages = manual_pages()
    rng = random.Random(12)
    texts = {language: written_texts(language, english_lines(pages), rng) for language in SNIPPETS}
    texts["en (manuals)"] = manual_texts(pages)
    out = []
    for language, by_length in texts.items():
        for encoding in ENCODINGS[language]:
            for length in LENGTHS:
                for text in by_length[length]:
                    saved = text.encode(encoding, "replace").decode(encoding)
                    if not is_utf8(saved.encode(encoding)):
                        out.append((language, encoding, length, saved))
    return out


def is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


# -- the readers --------------------------------------------------------------------------
def today(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def charset_normalizer_defaults(data: bytes) -> str:
    match = charset_normalizer.from_bytes(data).best()
    return str(match) if match is not None else today(data)


def decode_text_now(data: bytes) -> str:
    return decode_text(data, Path("manual.txt"))[0]


READERS = {"today (UTF-8, U+FFFD)": today,
           "charset-normalizer defaults": charset_normalizer_defaults,
           "decode_text now": decode_text_now}


# -- scoring ------------------------------------------------------------------------------
def same_meaning(original: str, decoded: str) -> bool:
    def norm(text: str) -> str:
        return unicodedata.normalize("NFKC", text.translate(JIS_VARIANTS))
    return norm(original) == norm(decoded)


def lost(original: str, decoded: str, ascii: bool = False) -> tuple[int, int]:
    """(characters of `original` missing from `decoded`, characters counted): non-ASCII ones,
    or with `ascii` the ASCII ones (a wrong multi-byte guess can swallow those)."""
    def counts(text: str) -> collections.Counter:
        return collections.Counter(char for char in text if char.isascii() == ascii)
    wanted = counts(original)
    return sum((wanted - counts(decoded)).values()), sum(wanted.values())


def score(rows, reader) -> list[dict]:
    results = []
    for language, encoding, length, text in rows:
        data = text.encode(encoding)
        start = time.perf_counter()
        decoded = reader(data)
        seconds = time.perf_counter() - start
        results.append({"language": language, "encoding": encoding, "length": length,
                        "bytes": len(data), "seconds": seconds, "exact": decoded == text,
                        "meaning": same_meaning(text, decoded), "lost": lost(text, decoded),
                        "ascii_lost": lost(text, decoded, ascii=True)})
    return results


def summary(results: list[dict]) -> dict:
    count, seconds = len(results), sum(r["seconds"] for r in results)
    lost_chars, non_ascii = map(sum, zip(*(r["lost"] for r in results)))
    ascii_lost, ascii_chars = map(sum, zip(*(r["ascii_lost"] for r in results)))
    return {"n": count, "bytes": sum(r["bytes"] for r in results) / count,
            "exact": sum(r["exact"] for r in results) / count,
            "meaning": sum(r["meaning"] for r in results) / count,
            "lost": lost_chars / max(1, non_ascii), "ascii_lost": ascii_lost / max(1, ascii_chars),
            "ms": seconds * 1000 / count,
            "mb_s": sum(r["bytes"] for r in results) / 1e6 / max(1e-9, seconds)}


def read_right(s: dict) -> str:
    """"exact", with the share of the same meaning after it where that is higher."""
    exact = f"{s['exact']:.0%}"
    return exact if f"{s['meaning']:.0%}" == exact else f"{exact} ({s['meaning']:.0%})"


def accuracy_table(by_reader: dict[str, list[dict]], key: str, values) -> str:
    names = list(by_reader)
    lines = [f"| {key} | texts | avg bytes | "
             + " | ".join(f"{name}: exact / lost" for name in names) + " |",
             "|---|--:|--:|" + "--:|" * len(names)]
    for value in values:
        parts = {name: summary([r for r in results if value == "all" or r[key] == value])
                 for name, results in by_reader.items()}
        first = parts[names[0]]
        cells = [f"{read_right(s)} / {s['lost']:.1%}" for s in parts.values()]
        lines.append(f"| {value} | {first['n']} | {first['bytes']:,.0f} | "
                     + " | ".join(cells) + " |")
    return "\n".join(lines)


def speed_table(by_reader: dict[str, list[dict]]) -> str:
    names = list(by_reader)
    lines = ["| length | " + " | ".join(f"{name}: ms per text / MB/s" for name in names)
             + " | ASCII lost, decode_text now |", "|---|" + "--:|" * (len(names) + 1)]
    for value in (*LENGTHS, "all"):
        parts = [summary([r for r in results if value == "all" or r["length"] == value])
                 for results in by_reader.values()]
        cells = [f"{s['ms']:.2f} / {s['mb_s']:.2f}" for s in parts]
        lines.append(f"| {value} | " + " | ".join(cells) + f" | {parts[-1]['ascii_lost']:.3%} |")
    return "\n".join(lines)


# -- UTF-8 and ASCII stay as they are -----------------------------------------------------
def utf8_check(pages: dict[str, list[str]]) -> str:
    """decode_text on valid UTF-8 (the snippets, the manuals) and on pure ASCII: unchanged,
    no warning, and its time against a bare bytes.decode."""
    manuals = ["\n".join(page_list) for page_list in pages.values()]
    texts = {"UTF-8": [" ".join(lines) for lines in SNIPPETS.values()] + manuals,
             "ASCII": [text.encode("ascii", "replace").decode("ascii") for text in manuals]}
    lines = ["| input | texts | MB | unchanged, no warning | decode_text MB/s "
             "| bytes.decode MB/s |", "|---|--:|--:|---|--:|--:|"]
    for kind, items in texts.items():
        datas = [text.encode("utf-8") for text in items] * 20
        ok = all(decode_text(data, Path("m.txt")) == (data.decode("utf-8"), []) for data in datas)
        ours = timed(lambda: [decode_text(data, Path("m.txt")) for data in datas])
        bare = timed(lambda: [data.decode("utf-8") for data in datas])
        megabytes = sum(map(len, datas)) / 1e6
        lines.append(f"| {kind} | {len(datas)} | {megabytes:.1f} | {'yes' if ok else 'NO'} | "
                     f"{megabytes / ours:,.0f} | {megabytes / bare:,.0f} |")
    return "\n".join(lines)


def big_files() -> str:
    """A 20 MB legacy file: what the guess costs where it costs most, against today's rule."""
    lines = ["| 20 MB file | decode_text now, s | today's rule, s | read right |",
             "|---|--:|--:|---|"]
    for language, encoding in (("de", "cp1252"), ("cs", "iso-8859-2"), ("ja", "shift_jis")):
        text = "\n".join(SNIPPETS[language]) + "\n"
        text = text.encode(encoding, "replace").decode(encoding)
        data = (text * (20_000_000 // len(text.encode(encoding)))).encode(encoding)
        start = time.perf_counter()
        decoded = decode_text_now(data)
        ours = time.perf_counter() - start
        start = time.perf_counter()
        today(data)
        old = time.perf_counter() - start
        right = "yes" if same_meaning(data.decode(encoding), decoded) else "no"
        lines.append(f"| {language} {encoding} | {ours:.2f} | {old:.2f} | {right} |")
    return "\n".join(lines)


def imports_detector_for_utf8() -> bool:
    """Whether decoding UTF-8 and ASCII imports charset_normalizer (a fresh interpreter)."""
    code = ("import sys; from pathlib import Path; from engine.ingest.text import decode_text; "
            "decode_text('prüfen'.encode(), Path('a.txt')); decode_text(b'ok', Path('b.txt')); "
            "print('charset_normalizer' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         check=True)
    return out.stdout.strip() == "True"


def timed(work) -> float:
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        work()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    started = time.perf_counter()
    rows = samples()
    by_reader = {name: score(rows, reader) for name, reader in READERS.items()}
    print(f"charset-normalizer {charset_normalizer.__version__}; {len(rows)} non-UTF-8 texts; "
          "exact: share read exactly (same meaning, where higher); lost: share of the "
          "non-ASCII characters missing\n")
    print(accuracy_table(by_reader, "length", (*LENGTHS, "all")) + "\n")
    encodings = sorted({name for names in ENCODINGS.values() for name in names})
    print(accuracy_table(by_reader, "encoding", encodings) + "\n")
    print(speed_table(by_reader) + "\n")
    print(big_files() + "\n")
    print(utf8_check(manual_pages()))
    print(f"\ncharset_normalizer imported to read UTF-8 or ASCII: {imports_detector_for_utf8()}")
    print(f"{time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
