"""The lead: the manual's own units (sentences, rows, settings...), measured choice, fragments left
out, short facts kept when they carry the question's words, and spans that point at the page's own text."""

from __future__ import annotations

import numpy as np
import pytest

from engine.answer.lead import (
    DEFAULT_WEIGHTS,
    LeadWeights,
    add_cosines,
    best_units,
    candidates,
    lead_quotes,
    page_runs,
)
from engine.answer.query import Query
from engine.answer.retrieval import RetrievalSettings, Retriever
from engine.ingest.chunking import chunk_document
from engine.types import Page, ParsedDocument, Passage, Quote, Span
from tests.helpers.tiny_collection import open_store

TERMS_ONLY = LeadWeights(cosine=0.0)


def passage(text: str, spans=None, heading_path=(), path="/manuals/pump.pdf") -> Passage:
    spans = spans or (Span(3, 0, len(text)),)
    return Passage(document_id=1, path=path, title="pump", chunk_ids=(1,), spans=tuple(spans), text=text,
                   heading_path=tuple(heading_path), score=1.0, similarity=0.5)


def normal(text: str) -> str:
    return " ".join(text.split())


def lead_sentences(question: str, passages, embedder=None, **options):
    return lead_quotes(Query.of(question, embedder=embedder), passages, embedder, **options)


def test_the_sentence_that_answers_leads_not_the_first():
    text = ("The pump is a sturdy machine built for years of service. "
            "Before the first start, prime the pump casing with clean water through the priming plug. "
            "Keep the manual near the machine.")
    quotes = lead_sentences("How do I prime the pump casing?", [passage(text)], weights=TERMS_ONLY)
    assert quotes[0].text == ("Before the first start, prime the pump casing with clean water "
                              "through the priming plug.")
    assert (quotes[0].number, quotes[0].document, quotes[0].page) == (1, "pump.pdf", 3)


def test_fragments_never_lead():
    text = ("4.2 Priming the pump\n"
            "Priming the pump . . . . . . . . . . . . 12\n"
            "Chapter 4: Pump priming 12\n"
            "Prime pump.\n"
            "Prime the pump casing with water until it runs out of the vent.")
    quotes = lead_sentences("How do I prime the pump?", [passage(text, heading_path=("4.2 Priming the pump",))],
                            weights=TERMS_ONLY)
    assert [q.text for q in quotes] == ["Prime the pump casing with water until it runs out of the vent."]


def test_a_heading_line_ingest_did_not_recognise_is_not_glued_onto_the_sentence():
    text = ("Multiple keys\n"
            "It is possible to construct a legend with several keys by placing each key with set key at.\n"
            "Syntax\n"
            "set key at <position> sets the position of the key box.")
    quotes = lead_sentences("How do I construct a legend with several keys?", [passage(text)], weights=TERMS_ONLY)
    assert quotes[0].text == "It is possible to construct a legend with several keys by placing each key with set key at."
    assert all(not q.text.startswith(("Multiple keys", "Syntax")) for q in quotes)


def test_a_short_line_inside_a_sentence_stays_in_it():
    text = ("Prime the pump casing with clean water through the\n"
            "Priming Plug\n"
            "before the first start.")
    quotes = lead_sentences("How do I prime the pump casing?", [passage(text)], weights=TERMS_ONLY)
    assert normal(quotes[0].text) == ("Prime the pump casing with clean water through the Priming Plug "
                                      "before the first start.")


def test_at_most_limit_quotes_each_once_and_the_passage_number_kept():
    first = passage("Nothing here is about the subject of this question at all, sadly.")
    text = "Open the drain valve slowly. Open the drain valve slowly. Then open the drain valve fully."
    second = passage(text, spans=(Span(8, 10, 10 + len(text)),))
    quotes = lead_sentences("How do I open the drain valve?", [first, second], limit=2, weights=TERMS_ONLY)
    assert len(quotes) == 2
    assert len({q.text for q in quotes}) == 2
    assert all(q.number == 2 and q.page == 8 for q in quotes)


def test_no_passages_no_lead():
    assert lead_sentences("How do I prime the pump?", []) == []


def test_the_embedder_measures_too(tiny_embedder):
    text = "Prime the pump with water before start. Error E-12 means the motor overheated."
    quotes = lead_sentences("prime pump water", [passage(text)], embedder=tiny_embedder)
    assert quotes and all(q.text in normal(text) for q in quotes)
    again = lead_quotes(Query.of("prime pump water", embedder=tiny_embedder), [passage(text)], tiny_embedder)
    assert [q.text for q in again] == [q.text for q in quotes]


class _Words:
    """An embedder whose vector counts a few words: what a cosine can measure, made plain."""

    def __init__(self, words):
        self.words = words

    def encode_documents(self, texts):
        vectors = np.array([[t.casefold().count(w) for w in self.words] for t in texts], dtype=np.float32)
        return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-9)


def test_a_short_unit_is_also_read_with_the_text_before_it():
    """"Download ... instead." says what it replaces only after the sentence before it; a long
    unit says what it is about itself and is read alone."""
    long = "The logger keeps about one hundred thousand points over Bluetooth, " * 2
    text = f"Reading these loggers over Bluetooth does not work. Download the data using the USB cable instead. {long}"
    found = candidates(Query.of("logger over bluetooth"), [passage(text)])
    add_cosines(found, np.array([1.0, 0.0]), _Words(("bluetooth", "cable")))
    reading, usb, keeps = found
    assert (reading.before, usb.before, keeps.before) == ("", "Reading these loggers over Bluetooth does not work.", "")
    assert (reading.cosine, usb.cosine) == (pytest.approx(1.0), pytest.approx(0.5 ** 0.5))


def test_a_quote_round_trips_and_narrows_its_passage_to_itself():
    quote = lead_sentences("prime pump casing", [passage("Prime the pump casing with clean water first.",
                                                         spans=(Span(5, 40, 85),))], weights=TERMS_ONLY)[0]
    assert quote.span == Span(5, 40, 85)
    back = Quote.from_dict(quote.to_dict())
    assert (back.number, back.text, back.document, back.span) == (1, quote.text, "pump.pdf", quote.span)
    narrowed = back.as_passage()
    assert narrowed.spans == (quote.span,) and narrowed.page == 5 and narrowed.path == "/manuals/pump.pdf"


def test_a_passage_whose_text_does_not_fit_its_spans_has_no_runs():
    assert page_runs(passage("Some text of the passage.", spans=(Span(1, 0, 0),))) == []


# -- spans against the page text, through the real chunker and retrieval's merging --------------
PAGE_ONE = " ".join(f"Sentence {w} of the first page tells how to prime pump number {w}." for w in
                    ("one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"))
PAGE_TWO = ("The second page goes on about the pump\nwith wrapped lines, as a PDF gives them.\n\n"
            + " ".join(f"Step {w} asks you to prime pump casing {w} with water." for w in
                       ("alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta")))
PAGES = {1: PAGE_ONE, 2: PAGE_TWO}


@pytest.fixture
def merged_passages(tmp_path, tiny_embedder) -> list[Passage]:
    doc = ParsedDocument("/manuals/pump.pdf", "pump", tuple(Page(n, t) for n, t in PAGES.items()))
    chunks = chunk_document(doc, lambda text: len(text.split()), target_tokens=24, overlap_tokens=8,
                            min_tokens=2)
    store = open_store(tmp_path / "collection", tiny_embedder)
    store.add_document(doc.path, "sha", size=1, mtime=1.0, title="pump", page_count=2, chunks=chunks,
                       embeddings=tiny_embedder.encode_documents([c.text for c in chunks]))
    retriever = Retriever(store, tiny_embedder, settings=RetrievalSettings(max_merged_chunks=3))
    found = retriever.search("prime pump casing water", 6)
    yield found
    store.close()


def test_merged_passages_map_every_sentence_to_its_page_text(merged_passages):
    merged = [p for p in merged_passages if len(p.spans) > 1]
    assert merged, "retrieval should have merged neighbouring chunks"
    assert any(len(p.pages) > 1 for p in merged_passages) or any(
        p.spans[1].start < p.spans[0].end for p in merged)
    checked = 0
    for p in merged_passages:
        assert page_runs(p), p
        for c in candidates(Query.of("prime pump casing water"), [p]):
            page_text = PAGES[c.span.page]
            assert normal(page_text[c.span.start:c.span.end]) == c.text
            checked += 1
    assert checked >= 10


def test_the_lead_of_merged_passages_highlights_its_own_words(merged_passages):
    for quote in lead_sentences("prime pump casing water", merged_passages, weights=TERMS_ONLY):
        assert normal(PAGES[quote.page][quote.span.start:quote.span.end]) == quote.text


def test_pieces_joined_across_pages_and_after_blank_lines_map_back():
    from engine.answer.retrieval import _joined

    page_one = "Fill the casing with water first.\n\nThen close the vent screw by hand. Start the pump and watch the gauge."
    page_two = "The pump then runs quietly. Check the seal for drips after an hour."
    cut = page_one.index("Then")
    chunks = [{"page": 1, "start": 0, "end": cut - 2, "text": page_one[:cut - 2]},
              {"page": 1, "start": 20, "end": len(page_one), "text": page_one[20:]},
              {"page": 2, "start": 0, "end": len(page_two), "text": page_two}]
    text = _joined(chunks)
    spans = tuple(Span(c["page"], c["start"], c["end"]) for c in chunks)
    found = candidates(Query.of("casing vent seal pump"), [passage(text, spans=spans)])
    assert len(found) == 5
    for c in found:
        assert normal((page_one, page_two)[c.span.page - 1][c.span.start:c.span.end]) == c.text


# -- units from the manual's structure (issue 27) --------------------------------------------------
def test_a_short_fact_leads_when_it_carries_the_question_s_words():
    door = passage("Door code: 7731.", path="/manuals/door.txt")
    x200 = passage("The X200 login uses the badge reader 8, which sits to the right of the main door "
                   "of the hall and is checked every morning by the shift lead.", path="/manuals/x200.md")
    quotes = lead_sentences("What is the door code?", [x200, door], weights=TERMS_ONLY)
    assert quotes[0].text == "Door code: 7731." and quotes[0].kind == "setting"
    assert quotes[0].document == "door.txt"


def test_a_short_line_without_the_question_s_words_stays_a_fragment():
    text = "Door code: 7731.\nThe pump must be primed with clean water before the first start."
    quotes = lead_sentences("How do I prime the pump?", [passage(text)], weights=TERMS_ONLY)
    assert [q.text for q in quotes] == ["The pump must be primed with clean water before the first start."]


def test_an_answer_under_the_manuals_question_is_no_fragment_and_a_list_number_is_no_value():
    """Seen in HackRF's FAQ: "2. Avoid it.", the first sentence of a long item under "How do I
    deal with the big spike ...?", led with the question's words lent by its header; and the
    sentence with the answer, too long to show under the question in SHOW_CHARS, was scored alone."""
    text = ("5.1 How do I deal with the big spike in the middle of my spectrum?\n"
            "Start by reading our FAQ response on the DC spike. After that, there are a few options:\n"
            "1. Ignore it. For many applications it isn't a problem.\n"
            "2. Avoid it. The best way to handle DC offset for most applications is to use offset tuning; instead "
            "of tuning to your exact frequency of interest, tune to a nearby frequency so that the entire signal you "
            "are interested in is shifted away from 0 Hz but still within the received bandwidth. "
            "If your algorithm works best with your signal centered at 0 Hz, you can shift the frequency in the "
            "digital domain, moving your signal to 0 Hz and your DC offset away from 0 Hz.\n")
    query = Query.of("How can I keep the DC spike in the middle of the spectrum away from my signal?")
    found = [(c.kind, c.text[slice(*c.focus)]) for c in candidates(query, [passage(text)])]
    assert ("answer", "Start by reading our FAQ response on the DC spike.") in found
    assert [own for kind, own in found if kind == "answer" and own.startswith("The best way")], found
    assert not [own for _, own in found if own in ("1. Ignore it.", "2. Avoid it.")], found


def test_a_table_numbered_by_its_rows_keeps_its_header():
    """Seen in HackRF's manual: "1 <tab> No <tab> No <tab> Yes" was taken for a numbered heading
    and "A2 Jumper" for a value, so the table had neither rows nor a header."""
    text = "Address\tA2 Jumper\tA1 Jumper\tA0 Jumper\n0\tNo\tNo\tNo\n1\tNo\tNo\tYes\n2\tNo\tYes\tNo\n"
    [quote] = lead_sentences("Which jumper sets address 1?", [passage(text)], weights=TERMS_ONLY, limit=1)
    assert quote.kind == "row" and quote.text.startswith("Address | A2 Jumper | A1 Jumper | A0 Jumper\n")


def test_a_table_row_is_shown_under_its_header_between_the_rows_beside_it():
    text = ("Tightening torques for the clamping unit are listed below.\n"
            "Part\tThread\tTorque\n"
            "Clamping bolts\tM12\t35 Nm\n"
            "Cover screws\tM6\t9 Nm\n"
            "Spindle nut\tM30\t120 Nm\n"
            "Base plate\tM16\t80 Nm\n")
    [quote] = lead_sentences("What torque for the cover screws?", [passage(text)], weights=TERMS_ONLY, limit=1)
    assert quote.kind == "row"
    assert quote.text == ("Part | Thread | Torque\nClamping bolts | M12 | 35 Nm\n"
                          "Cover screws | M6 | 9 Nm\nSpindle nut | M30 | 120 Nm")
    assert quote.text[slice(*quote.focus)] == "Cover screws | M6 | 9 Nm"
    assert text[quote.span.start:quote.span.end] == "Cover screws\tM6\t9 Nm"  # the source view marks the row


def test_a_setting_line_and_a_definition_are_units_of_their_own():
    text = ("The feed override is limited in the machine parameters.\n"
            "MAX_FEED_OVERRIDE = 1.2\n"
            "-t, --timeout=SEC\tStop after SEC seconds of no motion.\n")
    [setting] = lead_sentences("What is the maximum feed override?", [passage(text)], weights=TERMS_ONLY, limit=1)
    assert (setting.kind, setting.text) == ("setting", "MAX_FEED_OVERRIDE = 1.2")
    assert [setting.text[a:b] for a, b in setting.marks] == ["MAX", "FEED", "OVERRIDE"]  # drawn marked
    [option] = lead_sentences("Which option stops it after a timeout?", [passage(text)], weights=TERMS_ONLY, limit=1)
    assert (option.kind, option.text) == ("definition", "-t, --timeout=SEC: Stop after SEC seconds of no motion.")


def test_the_message_a_question_quotes_leads_and_is_marked_whole():
    """Seen on NTPsec's Trimble driver: a technician copies the log's message into the question."""
    text = ("Check the receiver log after each start: the receiver says there which packets it found.\n"
            "If trimble_poll prints no packets\nfound, check the serial cable to the receiver.\n")
    [quote] = lead_sentences('The receiver log says "no packets found" after each start. What should I check?',
                             [passage(text)], weights=TERMS_ONLY, limit=1)
    assert quote.text == "If trimble_poll prints no packets found, check the serial cable to the receiver."
    assert "no packets found" in [quote.text[a:b] for a, b in quote.marks]


def test_a_command_stays_in_the_sentence_it_is_part_of():
    text = "The command\n> sink(\"record.lis\")\nwill divert all subsequent output to an external file."
    [quote] = lead_sentences("How do I send the output to a file?", [passage(text)], weights=TERMS_ONLY, limit=1)
    assert quote.text == 'The command > sink("record.lis") will divert all subsequent output to an external file.'


@pytest.mark.parametrize("text, question, shown, kind", [
    pytest.param("To set the origin:\n1. Jog to the corner.\n2. Press SET ORIGIN.\n"
                 "To turn the laser off and cancel an alignment:\n1. Press the LASER button for longer than 750 ms.\n"
                 "2. Release the LASER button.\n", "How do I turn the alignment laser off?",
                 "To turn the laser off and cancel an alignment:\n1. Press the LASER button for longer than 750 ms.\n"
                 "2. Release the LASER button.", "sentence", id="a procedure under the sentence that introduces it"),
    pytest.param("Keep the pump primed.\nTo bleed the pump:\n+ Open the vent screw.\n+ Run the pump until water "
                 "comes out.\n", "How do I bleed the pump?",
                 "To bleed the pump:\n+ Open the vent screw.\n+ Run the pump until water comes out.", "sentence",
                 id="Markdown's + items are items too"),
    pytest.param("Notice that this is no schema conversion.\ngpxver option\nTarget GPX version for output.\n"
                 "The default version is 1.0 unless an input file is GPX 1.1.\nurlbase option\nThe value of this "
                 "option is prepended to URLs.\n", "Which GPX version is written by default?",
                 "gpxver option\nThe default version is 1.0 unless an input file is GPX 1.1.", "sentence",
                 id="under a heading that names an option, a sentence is shown under that name"),
    pytest.param("To turn the laser off and cancel an alignment:\n1. Press the LASER button for longer than 750 ms.\n"
                 "2. LASER button label will change to LASER and the HAL pin named\nqtplasmac.laser_on will be "
                 "turned off.\n", "What happens to the qtplasmac.laser_on pin when the laser is turned off?",
                 "2. LASER button label will change to LASER and the HAL pin named qtplasmac.laser_on will be turned "
                 "off.", "item",
                 id="a step that wraps is no numbered heading; it names the pin the question types"),
    pytest.param("The laser can be tied to a HAL pin with the following name:\nqtplasmac.laser_on\n"
                 "To set the origin with zero rotation:\n1. Click the LASER button.\n2. Press SET ORIGIN.\n",
                 "How do I set the origin with zero rotation?",
                 "To set the origin with zero rotation:\n1. Click the LASER button.\n2. Press SET ORIGIN.", "sentence",
                 id="a name a sentence gives ends that sentence"),
    pytest.param("To set the origin with rotation: 1. Click the LASER button.\n2. Jog to the edge of the sheet.\n",
                 "How do I set the origin with rotation?",
                 "To set the origin with rotation: 1. Click the LASER button.", "sentence",
                 id="a first step on its introduction's line stays with it"),
    pytest.param("The period times may be given on the command line:\nlatency-test 50000 1000000\n"
                 "This will start the latency test with a base thread of 50 us.\n",
                 "How do I start the latency test with a 50 us base thread?",
                 "The period times may be given on the command line: latency-test 50000 1000000 This will start the "
                 "latency test with a base thread of 50 us.", "sentence",
                 id="a command ending in numbers is no page footer"),
    pytest.param("For each joint, these keys are available:\nbacklash\n(returns float) - backlash in machine units.\n"
                 "ferror_current\n(returns float) - current following error.\nhomed\n(returns integer) - non-zero "
                 "means homed.\n", "How do I read the current following error?",
                 "ferror_current (returns float) - current following error.", "definition",
                 id="a name alone on its line over its description"),
    pytest.param("To replace the filter cartridge:\n1. Close the inlet valve.\nPart\tThread\tTorque\n"
                 "Cover screws\tM6\t9 Nm\nDrain plug\tM12\t35 Nm\n2. Open the drain plug.\n",
                 "How do I replace the filter cartridge?",
                 "To replace the filter cartridge:\n1. Close the inlet valve.", "sentence",
                 id="a table ends the list a sentence introduces"),
    pytest.param("Appendix B Troubleshooting\n• Problem: The spindle drive trips with E-07 when it starts.\n"
                 "Solution: Raise the ramp time in parameter P21 to 2 s.\n"
                 "The drive then needs a minute to cool down before it can be started again, and the fault log keeps "
                 "the last ten trips with their times and the motor current at the moment of each trip. Each trip "
                 "also goes to the controller's alarm history, which the service menu shows under ALARMS.\n"
                 "• Problem: The coolant pump is noisy.\nSolution: Bleed the air from the pump.\n",
                 "My spindle drive trips with E-07 when it starts. What do I do?",
                 "• Problem: The spindle drive trips with E-07 when it starts.\n"
                 "Solution: Raise the ramp time in parameter P21 to 2 s.", "answer",
                 id="a troubleshooting entry too long to show whole: the solution under its problem"),
    pytest.param("Why does the pump run dry after a restart?\nThe inlet valve closes on a power loss.\n",
                 "Why does my pump run dry after a restart?",
                 "Why does the pump run dry after a restart?\nThe inlet valve closes on a power loss.", "answer",
                 id="a question the manual asks, answered below it"),
    pytest.param("ABSTOL=x resets the absolute current error tolerance of the program. The default value is 1\n"
                 "pA.\nGMIN=x resets the value of GMIN, the minimum conductance allowed by the program.\n",
                 "What is the default absolute current error tolerance?",
                 "ABSTOL=x resets the absolute current error tolerance of the program. The default value is 1 pA.",
                 "definition", id="an option's entry with its description wrapped onto the next line"),
    pytest.param("PIVREL=x resets the relative ratio between the largest column entry and an acceptable pivot\n"
                 "value. The default value is 1.0e-3. In the numerical pivoting algorithm the allowed minimum "
                 "pivot value is determined by EPSREL = AMAX1(PIVREL * MAXVAL, PIVTOL), where MAXVAL is the "
                 "maximum element in the column where a pivot is sought, and the partial pivoting that follows "
                 "uses it for every row.\n", "What is the default relative pivot ratio PIVREL?",
                 "PIVREL=x resets the relative ratio between the largest column entry and an acceptable pivot "
                 "value. The default value is 1.0e-3.", "definition",
                 id="an entry too long to show whole: its first sentences under its name"),
    pytest.param("-i --interactive Run in interactive mode.\n-b --batch Run in batch mode. Ngspice reads the\n"
                 "given input file and performs the analyses specified.\n",
                 "How do I run the analyses of an input file in batch mode?",
                 "-b --batch Run in batch mode. Ngspice reads the given input file and performs the analyses "
                 "specified.", "definition", id="a command-line option's entry"),
    pytest.param("ITL2=x resets the dc transfer curve iteration limit. The default is 50.\n"
                 "KEEPOPINFO Retain the operating point information when an AC analysis is run.\n",
                 "What is the default dc transfer curve iteration limit?",
                 "ITL2=x resets the dc transfer curve iteration limit. The default is 50.", "definition",
                 id="an entry ends where the next option's begins"),
    pytest.param("ngspice uses the following convergence aids, in order:\n1. gmin stepping (gminsteps option).\n"
                 "2. source stepping (srcsteps option)\n3. transient operating point (optional)\n",
                 "Which convergence aids does ngspice use, in order?",
                 "ngspice uses the following convergence aids, in order:\n1. gmin stepping (gminsteps option).\n"
                 "2. source stepping (srcsteps option)\n3. transient operating point (optional)", "sentence",
                 id="a step in lower case is no numbered heading"),
    pytest.param("It will force an emergency shutdown.\nLOTRANS\nThe line voltage below which the UPS will switch "
                 "to batteries.\nHITRANS\nThe line voltage above which the UPS will switch to batteries.\n",
                 "What does LOTRANS mean?",
                 "LOTRANS The line voltage below which the UPS will switch to batteries.", "definition",
                 id="a name in capitals alone on its line over its description"),
    pytest.param("MINUTES battery runtime in minutes\nIf MINUTES is specified, apcupsd will shut the system down when "
                 "the remaining runtime on batteries falls below the time specified. The default is 3. This directive "
                 "is ignored for dumb UPSes.\nANNOY time in seconds\nSpecify the time in seconds between messages "
                 "requesting logged in users to get off the system during a power failure. This timer starts only "
                 "when the UPS is running on batteries. The default is 300 seconds (5 minutes). apcupsd sends the "
                 "annoy messages by invoking the apccontrol script with the annoyme argument.\n",
                 "How often are logged in users asked to get off the system during a power failure, by default?",
                 "ANNOY time in seconds Specify the time in seconds between messages requesting logged in users to "
                 "get off the system during a power failure. This timer starts only when the UPS is running on "
                 "batteries. The default is 300 seconds (5 minutes).", "definition",
                 id="a directive in capitals with what it takes: its entry shown whole, a program's name starts a "
                    "sentence"),
    pytest.param("-E Run only the C preprocessor.\n-o <path/file> The output path where everything will be placed. "
                 "If the parameter is a path, it must have a trailing slash.\n"
                 "--stack-auto All functions are reentrant.\n",
                 "What must the output path I give sdcc end with?",
                 "-o <path/file> The output path where everything will be placed. If the parameter is a path, it must "
                 "have a trailing slash.", "definition", id="an option with its argument's placeholder"),
    pytest.param("The processor type has not been defined.\n302 Register in operand not in bank 0. Ensure bank bits "
                 "are correct.\nAccessing a register outside of bank 0. User must select the bank with banksel.\n"
                 "303 Program word too large. Truncated to core size.\n", "What do I do about gpasm message 302?",
                 "302 Register in operand not in bank 0. Ensure bank bits are correct. Accessing a register outside "
                 "of bank 0. User must select the bank with banksel.", "definition",
                 id="an error code's entry, its description under it"),
    pytest.param("When not specified, the port number defaults to 6666.\nConfig Command: telnet_port [number] ¶\n"
                 "Specify or query the port on which to listen for incoming telnet connections. This port is intended "
                 "for interaction with one human through TCL commands. When not specified during the configuration "
                 "stage, the port number defaults to 4444. When specified as \"disabled\", this service is not "
                 "activated.\n", "Which port does the telnet server listen on when it is not configured?",
                 "Config Command: telnet_port [number]\nSpecify or query the port on which to listen for incoming "
                 "telnet connections. This port is intended for interaction with one human through TCL commands. When "
                 "not specified during the configuration stage, the port number defaults to 4444.", "definition",
                 id="texinfo's entry of a command in HTML: its default under its name"),
    pytest.param("Single-step the target at its current code position.\n\nCommand: reset ¶\nCommand: reset run ¶\n"
                 "Command: reset halt ¶\nCommand: reset init ¶\nPerform as hard a reset as possible, using SRST if "
                 "possible. All defined targets will be reset.\n",
                 "Which command does a reset and halts the target?",
                 "Command: reset\nCommand: reset run\nCommand: reset halt\nCommand: reset init\nPerform as hard a "
                 "reset as possible, using SRST if possible. All defined targets will be reset.", "definition",
                 id="texinfo's entries of several commands over one description: all of them with it, one to a line"),
    pytest.param("double beta (double a, double b)\t[Function]\ndouble lbeta (double a, double b)\t[Function]\n"
                 "The (complete) Beta function and its natural logarithm.\ndouble choose (double n, double k)\t"
                 "[Function]\nThe number of combinations of k items chosen from n.\n",
                 "Which C function gives the natural logarithm of the Beta function?",
                 "double beta (double a, double b) [Function]\ndouble lbeta (double a, double b) [Function]\nThe "
                 "(complete) Beta function and its natural logarithm.", "definition",
                 id="texinfo's entries of functions in a PDF: their description under their names"),
    pytest.param("See also: [csvwrite], page 285.\nx = csvread (filename)\nx = csvread (filename, dlm_opt1, . . .)\n"
                 "Read the comma-separated-value (CSV) file filename into the matrix x.\nNote: only CSV files "
                 "containing numeric data can be read.\n", "Which function reads a CSV file into a matrix?",
                 "x = csvread (filename)\nx = csvread (filename, dlm_opt1, . . .)\nRead the comma-separated-value "
                 "(CSV) file filename into the matrix x.",
                 "definition", id="a function's forms with no category over its description (Octave's PDF)"),
    pytest.param("The script reads the status.\nimport linuxcnc\ns = linuxcnc.stat()\ns.poll()\nprint(s.joint[1])\n"
                 "For each joint, the keys below are available.\n", "Which keys are available for each joint?",
                 "import linuxcnc s = linuxcnc.stat() s.poll() print(s.joint[1]) For each joint, the keys below are "
                 "available.", "sentence", id="a program's lines calling other functions are no function's forms"),
    pytest.param("That operation gates the CPU clock, and thus the JTAG clock.\n\nTo set the JTAG frequency use the "
                 "command:\n\n# Example: 1.234MHz\nadapter speed 1234\n\nWin32 Pathnames Why don't backslashes work in "
                 "Windows paths?\n", "How do I set the JTAG frequency?",
                 "To set the JTAG frequency use the command:\n# Example: 1.234MHz\nadapter speed 1234", "sentence",
                 id="a command under the sentence that introduces it"),
    pytest.param("Alpha and Beta each drive two of the four power supplies.\nThe upsmon.conf configuration which "
                 "reflects this is the following:\nMONITOR ups-alpha@myhost 2 monuser mypass primary\n"
                 "MONITOR ups-beta@myhost\t2 monuser mypass primary\nMINSUPPLIES 2\nWith such configuration, upsmon "
                 "only shuts down when both reach a critical condition.\n",
                 "Which upsmon.conf configuration reflects this?",
                 "The upsmon.conf configuration which reflects this is the following:\nMONITOR ups-alpha@myhost 2 "
                 "monuser mypass primary\nMONITOR ups-beta@myhost 2 monuser mypass primary\nMINSUPPLIES 2", "sentence",
                 id="configuration lines under the sentence that introduces them, one to a line; a keyword in "
                    "capitals no heading"),
    pytest.param("The following applies to the 66102 card.\nThe card's connection is an 8P8C RJ45-style jack.\n"
                 "Signal\tPC\tNMC\nTxD\t2\t3\nRxD\t3\t6\nGND\t5\t4\nThis cable is used on the newer models too.\n",
                 "How is the RJ45 jack of the card wired?", "The card's connection is an 8P8C RJ45-style jack.\n"
                 "Signal | PC | NMC\nTxD | 2 | 3\nRxD | 3 | 6\nGND | 5 | 4", "sentence",
                 id="a table under the sentence before it, when the whole table fits: its rows repeat no words"),
    pytest.param("Create a handler for an ONBATT condition.\nAT ONBATT * START-TIMER onbattwarn 30\n"
                 "We come back to that name in a moment.\n",
                 "How do I start the onbattwarn timer?", "AT ONBATT * START-TIMER onbattwarn 30", "setting",
                 id="a configuration line in capitals, a lone star among its values"),
    pytest.param("The status output holds the time on batteries.\nTONBATT: 0 seconds\nCUMONBATT: 0 seconds\n"
                 "Other fields follow.\n", "What does CUMONBATT show?", "CUMONBATT: 0 seconds", "setting",
                 id="a status line, its key in capitals, no heading"),
    pytest.param("Here are the steps when a critical power event happens:\n1. The UPS goes on battery\n"
                 "2. The UPS reaches low battery\n3. The upsmon primary notices and sets FSD\n",
                 "What are the steps of a critical power event?",
                 "Here are the steps when a critical power event happens:\n1. The UPS goes on battery\n"
                 "2. The UPS reaches low battery\n3. The upsmon primary notices and sets FSD", "sentence",
                 id="a numbered step after its introduction is no heading"),
    pytest.param("Change the port name, or fix the permissions of /dev/ttyS2 and try again.\n"
                 "Unable to open /dev/ttyS2: Permission denied\nNow is a good time to talk about the nobody user.\n",
                 "Which message says it is unable to open the port?",
                 "Unable to open /dev/ttyS2: Permission denied", "sentence",
                 id="a message with a path in it is no heading"),
    pytest.param("5.1 How do I deal with the big spike in the middle of my spectrum?\nTune to a nearby frequency.\n"
                 "5.2 How should I set the gain controls for RX?\nA good default setting to start with is RF=0 (off), "
                 "IF=16, baseband=16. Increase or decrease the IF and baseband gain controls roughly equally.\n",
                 "What gain settings should I start from when receiving?",
                 "How should I set the gain controls for RX?\nA good default setting to start with is RF=0 (off), "
                 "IF=16, baseband=16.", "answer", id="a section headed by a question: its text answers it"),
    pytest.param("## How should I set the gain controls for RX?\n\nA good default setting to start with is RF=0 (off), "
                 "IF=16, baseband=16.\n", "What gain settings should I start from when receiving?",
                 "How should I set the gain controls for RX?\nA good default setting to start with is RF=0 (off), "
                 "IF=16, baseband=16.", "answer", id="a Markdown heading that asks: shown without its marks"),
    pytest.param("HackRF One's maximum TX power varies by operating frequency:\n"
                 "• 2150 MHz to 2750 MHz: 13 dBm to 15 dBm\n"
                 "• 4000 MHz to 6000 MHz: -10 dBm to 0 dBm, generally decreasing as frequency increases\n"
                 "Through most of the frequency range up to 4 GHz, the maximum TX power is between 0 and 10 dBm, which "
                 "is enough for\nover-the-air experiments at close range or to drive an external amplifier.\n",
                 "What is the most TX power through most of the range up to 4 GHz?",
                 "Through most of the frequency range up to 4 GHz, the maximum TX power is between 0 and 10 dBm, which "
                 "is enough for over-the-air experiments at close range or to drive an external amplifier.", "sentence",
                 id="the paragraph after a list is not its last item's"),
    pytest.param("Known problems with the JTAG ICE, found in use and documented by Atmel in the AVR datasheets:\n"
                 "• Problem: Page-mode programming the EEPROM (using the -U option) does not erase\n"
                 "EEPROM cells before writing, and thus cannot overwrite any previous value.\n",
                 "Why can page-mode programming not overwrite EEPROM cells?",
                 "• Problem: Page-mode programming the EEPROM (using the -U option) does not erase EEPROM cells "
                 "before writing, and thus cannot overwrite any previous value.", "item",
                 id="an indented item wraps onto a line that starts with a name in capitals"),
    pytest.param("6. If you are using CUPS, enable debugging output. This can be done by editing\n/etc/cups/cupsd.conf "
                 "(which must be done as the superuser). Change the\nfollowing line from:\nLogLevel Info\nto\n"
                 "LogLevel Debug\nThis will allow CUPS to produce extensive debugging output.\n",
                 "Which line turns on debug output in cupsd.conf?",
                 "6. If you are using CUPS, enable debugging output. This can be done by editing /etc/cups/cupsd.conf "
                 "(which must be done as the superuser). Change the following line from: LogLevel Info to LogLevel "
                 "Debug", "item",
                 id="a step that holds a sentence's end is no heading; a value on a short line after 'to' ends it"),
    pytest.param("See the directive for the default settings.\n\n-Mcsecs --message-timeout=csecs\n"
                 "Specify the amount of time (in hundredths of a second) that BRLTTY keeps its own messages on the "
                 "braille display. If not specified, then 400 (4 seconds) is assumed.\n\n-N --no-api\nDisable the "
                 "application programming interface.\n", "If the message timeout is not specified, what is assumed?",
                 "-Mcsecs --message-timeout=csecs Specify the amount of time (in hundredths of a second) that BRLTTY "
                 "keeps its own messages on the braille display. If not specified, then 400 (4 seconds) is assumed.",
                 "definition", id="an option's short and long forms on a line of their own, its default under them"),
    pytest.param("Material: stainless steel\nConnector: RJ45 socket on the rear panel\nCooling: passive, no fan\n",
                 "Which connector is on the rear panel?", "Connector: RJ45 socket on the rear panel", "setting",
                 id="a data sheet's lines with no number in them"),
    pytest.param("Q: How do I reset the unit?\nA: Hold the reset key for 5 s.\nQ: Why is the fan loud?\n"
                 "A: The fan filter is dirty.\n", "How do I reset the unit?",
                 "Q: How do I reset the unit?\nA: Hold the reset key for 5 s.", "answer",
                 id="a question and its answer are no data sheet's lines"),
    pytest.param("Column\tSample\tMeaning\nSPECTRACOM(1)\t\treceiver identifier (Spectracom unit 1)\n",
                 "What is the receiver identifier of Spectracom unit 1?",
                 "SPECTRACOM(1): receiver identifier (Spectracom unit 1)", "definition",
                 id="a term and its description with an empty cell between"),
    pytest.param("I/O Pin Type\tFunction\nINPUT_ONLY\tOnly accepts input (like MCLR)\nOPEN_COLLECTOR\tCan only drive "
                 "low (RA4 on c84)\n\nTo connect two I/O pins to one another, define a node and attach both pins "
                 "to it.\n",
                 "How do I connect two I/O pins together?",
                 "To connect two I/O pins to one another, define a node and attach both pins to it.", "sentence",
                 id="an abbreviation with a slash names no entry"),
    pytest.param("Note\tNo rule may override the minimum values set in the Constraints section.\n",
                 "Can a rule override the minimum values?",
                 "Note: No rule may override the minimum values set in the Constraints section.", "warning",
                 id="an admonition's label in a cell beside its text"),
    pytest.param("Question:\tThe daemon says it cannot open /dev/cua01. What is the problem?\n"
                 "Answer:\tThe serial port device name in the configuration file is wrong.\n",
                 "The daemon cannot open /dev/cua01. What is the problem?",
                 "Question: The daemon says it cannot open /dev/cua01.\nAnswer: The serial port device name in the "
                 "configuration file is wrong.", "answer", id="a field list's question beside its text"),
    pytest.param("Table 2. Data items\nSymbol\tMeaning\nUTC\tTime of day of the sentence on the UTC timescale.\n"
                 "V\tGPS sync status: 0 invalid, 1 within 20 ms.\n\nThe fields of the sentence tell the time of day.\n",
                 "What does the V field of the sentence tell me?", "V: GPS sync status: 0 invalid, 1 within 20 ms.",
                 "definition", id="a field the question names by its symbol"),
])
def test_units_a_machine_manual_sets_on_lines_of_their_own(text, question, shown, kind):
    """Seen in the LinuxCNC manual (DocBook through XeTeX), AVRDUDE's, apcupsd's, gputils',
    HackRF's and NTPsec's: procedures, commands, lists of terms, FAQ sections, a driver's
    synopsis that the lead had cut apart or dropped. A procedure's steps are shown one under
    another."""
    [quote] = lead_sentences(question, [passage(text)], weights=TERMS_ONLY, limit=1)
    assert (quote.text, quote.kind) == (shown, kind)



@pytest.mark.parametrize("text, question, first", [
    ("For each joint, these keys are available:\nferror_current\n(returns float) - current following "
     "error.\nmax_ferror\n(returns float) - maximum following error. Reflects [JOINT_n]FERROR.\n",
     "Which key holds the maximum following error?",
     "max_ferror (returns float) - maximum following error. Reflects [JOINT_n]FERROR."),
    ("6.1 How can I find out what package produced a particular file?\nTo identify the package that produced "
     "the file named foo execute either:\n• dpkg --search foo\n• dlocate -S foo\n",
     "How do I find out which package produced a file?",
     "How can I find out what package produced a particular file?\nTo identify the package that produced the file "
     "named foo execute either:\n• dpkg --search foo\n• dlocate -S foo"),
])
def test_a_unit_shown_in_one_quote_is_never_another(text, question, first):
    """Seen on LinuxCNC's Python interface: "(returns float) - maximum following error." led
    without its key, and came again under it in the next quote; in the Debian FAQ, a command
    shown under its introduction came again on its own."""
    quotes = lead_sentences(question, [passage(text)], weights=TERMS_ONLY)
    assert quotes[0].text == first
    assert all(a.text[slice(*a.focus)] not in b.text for a in quotes for b in quotes if a is not b), quotes

VANILLA = ("Most use --vanilla when they start R from a script and want no startup files read at all.\n"
           "--vanilla Combine --no-save, --no-environ, --no-site-file, --no-init-file and --no-restore.\n")
TX_POWER = ("The frequency range with best performance is 2150 MHz to 2750 MHz, where the maximum transmit power is "
            "highest.\n• 10 MHz to 2150 MHz: 5 dBm to 15 dBm\n• 2150 MHz to 2750 MHz: 13 dBm to 15 dBm\n"
            "• 2750 MHz to 4000 MHz: 0 dBm to 5 dBm\n")

JUMPERS = ("Each board has a numeric address set by optional jumpers installed on header P1.\n"
           "Address\tA2 Jumper\tA1 Jumper\tA0 Jumper\n0\tNo\tNo\tNo\n1\tNo\tNo\tYes\n2\tNo\tYes\tNo\n")


@pytest.mark.parametrize("text, question, named, first", [
    (VANILLA, "What does --vanilla do when I start R from a script?", DEFAULT_WEIGHTS.named, "--vanilla Combine"),
    (VANILLA, "What does --vanilla do when I start R from a script?", 0.0, "Most use"),
    (TX_POWER, "What is the maximum transmit power between 2150 and 2750 MHz?", DEFAULT_WEIGHTS.named, "• 2150 MHz"),
    (TX_POWER, "What is the maximum transmit power between 2150 and 2750 MHz?", 0.0, "The frequency range"),
    (JUMPERS, "Which jumpers do I install on P1 to give the board the address 1?", DEFAULT_WEIGHTS.named,
     "Address | A2 Jumper | A1 Jumper | A0 Jumper\n0 | No | No | No\n1 | No | No | Yes"),
    (JUMPERS, "Which jumpers do I install on P1 to give the board the address 1?", 0.0, "Each board"),
])
def test_an_entry_headed_by_a_name_the_question_typed_or_an_item_holding_them_leads(text, question, named, first):
    """Seen in gputils' list of messages ("warning 203"), R's options and HackRF's tables of TX
    power by frequency and of Opera Cake's addresses: the entry, the item or the row the question
    names lost to prose about it, whose words the question shares."""
    quotes = lead_sentences(question, [passage(text)], weights=LeadWeights(cosine=0.0, named=named))
    assert quotes[0].text.startswith(first), quotes


SYMPTOM = "A user reported random incorrect values from the UPS in the status output."
CAUSE = "It turned out that gpm, the mouse program, was reading the same serial port."


FAQ_ITEM = "6. LPC2000 Flash When erasing or writing LPC2000 on-chip flash, the operation fails at random."
FAQ_ANSWER = ("Make sure the core frequency specified in the flash lpc2000 line matches the clock at the time you're "
              "programming the flash.")


@pytest.mark.parametrize("text, question, shown, focus", [
    (SYMPTOM + " " + CAUSE, "I get random incorrect values from the UPS in the status output. What could cause this?",
     SYMPTOM + " " + CAUSE, SYMPTOM),
    (SYMPTOM + " " + CAUSE, "Where do the random incorrect values from the UPS show up?", SYMPTOM, SYMPTOM),
    (FAQ_ITEM + "\n" + FAQ_ANSWER + " If you've specified the crystal's frequency, make sure the PLL is disabled.",
     "Erasing the LPC2000's on-chip flash fails at random. What should I check?",
     FAQ_ITEM + " " + FAQ_ANSWER, FAQ_ITEM),
])
def test_asked_why_or_what_to_do_the_sentence_after_the_symptom_is_shown_with_it(text, question, shown, focus):
    """Seen in apcupsd's manual: the sentence that states the symptom led, and the cause after it
    was not shown. It is shown with it, and the symptom alone is highlighted. The same for a
    list item that states it (OpenOCD's FAQ, a numbered list in HTML)."""
    quote = lead_sentences(question, [passage(text + " The daemon locks the port it uses.")], weights=TERMS_ONLY)[0]
    assert (quote.text, quote.text[slice(*quote.focus)]) == (shown, focus)


def test_a_heading_that_names_an_option_is_shown_once_and_only_over_its_own_section():
    text = ("gpxver option\nTarget GPX version for output.\nThe default GPX version is 1.0.\nThe other GPX version "
            "is 1.1.\nRearrange waypoints, routes and/or tracks by\nresorting (sort)\nThis filter sorts the GPX "
            "waypoints.\n")
    first, second = lead_sentences("Which GPX version is written by default?", [passage(text)], weights=TERMS_ONLY,
                                   limit=2)
    assert first.text == "gpxver option\nThe default GPX version is 1.0."
    assert second.text == second.text[slice(*second.focus)] == "The other GPX version is 1.1."  # the name shown once
    asked = lead_sentences("Which GPX version is written by default, and what is its target?", [passage(text)],
                           weights=TERMS_ONLY)  # a quote never shows again what one before it showed
    assert [q.text for q in asked] == ["gpxver option\nThe default GPX version is 1.0.",
                                       "The other GPX version is 1.1."]
    [sorts] = lead_sentences("How do I sort GPX waypoints?", [passage(text)], weights=TERMS_ONLY, limit=1)
    assert not sorts.text.startswith("gpxver")  # a heading ingest did not mark ends the option's section
    wrapped = "Pick the rate with\nthe option\nBaud rates above 9600 need a short cable of at most 2 m.\n"
    [rate] = lead_sentences("Which cable do baud rates above 9600 need?", [passage(wrapped)], weights=TERMS_ONLY)
    assert rate.text == rate.text[slice(*rate.focus)]  # "the option" ends a sentence: no heading


BAUD = "This option sets the baud rate for serial communications."
BAUD_TEXT = BAUD + " It must match the rate set on the receiver. The default value is 4800. Use 9600 for new units."
FIRMNESS = "Adjust the firmness (or stiffness) of the braille dots."
FIRMNESS_TEXT = (f"Braille Firmness\n{FIRMNESS} It can be set to:\n• Maximum\n• High\n• Medium\n• Low\n\nThis "
                 "preference is only available if a driver which supports it is being used. The initial setting is "
                 "Medium.\n\nBraille Sensitivity\nAdjust the sensitivity of the braille dots to touch.")


@pytest.mark.parametrize("text, question, shown, focus", [
    (BAUD_TEXT, "Which baud rate does the serial connection use by default?",
     BAUD + " It must match the rate set on the receiver. The default value is 4800.", BAUD),
    (BAUD_TEXT, "Which baud rate can I set for serial communications?", BAUD, BAUD),
    (FIRMNESS_TEXT, "What is the braille dot firmness set to out of the box?",  # over the choices, and after them
     FIRMNESS + " It can be set to:\n• Maximum\n• High\n• Medium\n• Low\nThis preference is only available if a "
     "driver which supports it is being used. The initial setting is Medium.", FIRMNESS),
])
def test_asked_for_a_default_the_sentences_up_to_the_one_that_states_it_are_shown(text, question, shown, focus):
    """Seen in GPSBabel's options and BRLTTY's preferences: the sentence that names the setting
    led, and its default, two sentences on (or under the list of its choices), was not shown."""
    quote = lead_sentences(question, [passage(text)], weights=TERMS_ONLY)[0]
    assert (quote.text, quote.text[slice(*quote.focus)]) == (shown, focus)


def test_each_citation_quotes_its_passage_s_best_unit():
    first = passage("Keep the manual near the machine. Close the valve when the pump runs.")
    second = passage("Prime the pump with water before you start it. The motor is air-cooled.")
    best = best_units(Query.of("When must the valve be closed?"), [first, second])
    assert best[1].text == "Close the valve when the pump runs."
    assert best[2].text == "Prime the pump with water before you start it."


def test_a_numbered_item_is_one_unit_with_its_number():
    """A list item's "2." is no sentence of its own: the lead quotes the item, and its span
    highlights the item, not the number alone (seen on the NUT user manual's page 39)."""
    text = ('What happens then:\n2. The UPS reaches low battery (a "critical" UPS), that is to say, '
            "upsc displays: OB LB")
    quotes = lead_sentences("What does LB mean when upsc shows the UPS status?", [passage(text)], weights=TERMS_ONLY)
    item = text.index("2. The UPS")
    assert quotes[0].kind == "item" and quotes[0].span == Span(3, item, len(text))
    assert not any(q.text.strip() == "2." or q.span.end - q.span.start <= 3 for q in quotes)


def test_a_second_answer_to_the_manuals_question_is_shown_without_it_and_prose_questions_answer_nothing():
    text = ("• Problem: The spindle drive trips with E-07 when it starts.\n"
            "Solution: Raise the ramp time in parameter P21 to 2 s. Then restart the spindle drive.\n"
            "The drive then needs a minute to cool down before it can be started again, and the fault log keeps "
            "the last ten trips with their times and the motor current at the moment of each trip. Each trip "
            "also goes to the controller's alarm history, which the service menu shows under ALARMS.\n")
    first, second = lead_sentences("The spindle drive trips with E-07. What do I do?", [passage(text)],
                                   weights=TERMS_ONLY, limit=2)
    assert first.text.startswith("• Problem:") and first.text[slice(*first.focus)].startswith("Solution:")
    assert second.text == second.text[slice(*second.focus)] == "Then restart the spindle drive."
    prose = "The drive has a reset key. The spindle stops, so what now? Press the reset key on the drive."
    [quote] = lead_sentences("What now when the spindle stops?", [passage(prose)], weights=TERMS_ONLY, limit=1)
    assert quote.kind == "sentence"  # a question inside prose is a sentence like any other
