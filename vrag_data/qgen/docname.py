"""A readable name for a document, for questions that must say which document they are about.

A question over a corpus of several 10-Ks has one answer only when it names the company, the report and the
period; the file's own title is often no help (an SEC filing's is its accession number, "0001018724-18-000005"),
and the file name is an artefact of whoever saved it. So the name is read from the first page:
- an SEC filing: the form ("FORM 10-K"), the registrant (the line above "(Exact name of registrant ...)") and the
  period ("For the fiscal year ended December 31, 2017") -> "the Form 10-K of Amazon.com, Inc. for the fiscal year
  ended December 31, 2017";
- anything else: a title quoted in a citation line ("RECOMMENDED CITATION: ..., “Title”"), else page 1's
  largest-font text (a paper's title), else the layout model's first title block on page 1, else a readable
  metadata title; with the year of a dated line on page 1, else its first year that is no citation of another work.
The result is document text: callers treat it as untrusted (it is cut, and stripped of control characters, here).
"""

from __future__ import annotations

import re
import unicodedata

MAX_CHARS = 120
MAX_TITLE_WORDS = 18  # a longer first-page line is a sentence of prose, not a title
_FORM = re.compile(r"\bFORM\s+(10-K|10-Q|8-K|20-F|40-F|6-K)\b", re.I)  # a cover prints "FORM 10-K" or "Form 10-K"
_REGISTRANT = re.compile(r"([^\n]{2,100})\n[\s\n]*\(\s*Exact name of registrant", re.I)
_PERIOD = re.compile(r"For the (fiscal year|quarterly period) ended\s+([A-Z][a-z]+\s+\d{1,2},\s*(?:19|20)\d\d)", re.I)
# the registrant printed in capitals on the line after the commission file number
_AFTER_FILE_NUMBER = re.compile(r"Commission File Number[^\n]*\n[\s\n]*([A-Z][A-Z0-9&.,' \-]{2,80}[A-Z.])\s*\n")
_REPORT_DATE = re.compile(r"Date of (?:R|r)eport[^\n]*?\)?\s*:?\s*\n?\s*([A-Z][a-z]+\s+\d{1,2},\s*(?:19|20)\d\d)")
# only a publisher's own citation block ("RECOMMENDED CITATION: ..."): a paper's page 1 cites other works by title
_CITATION = re.compile(r"(?:RECOMMENDED|SUGGESTED|PREFERRED)\s+CITATION[^\u201c\"]{0,120}[\u201c\"]([^\u201d\"]{6,150})[\u201d\"]",
                       re.I | re.S)
# page headers that name no document: a filing's agency and form line, a contents heading, a preprint stamp
_BOILERPLATE = re.compile(
    r"united\s+states\b|securities\s+and\s+exchange\s+commission|washington,?\s+d\.?\s*c\.?(\s+\d{5})?|"
    r"\bform\s+(10-K|10-Q|8-K|20-F|40-F|6-K)\b|table\s+of\s+contents|\barxiv:?\s*[\d.v]*(\s*\[[^\]]*\])?|"
    r"\bpage\s+\d+(\s+of\s+\d+)?", re.I)
_YEAR = re.compile(r"(?<!\d)(19[5-9]\d|20[0-4]\d)(?!\d)")
# a year a paper cites another work by ("(Riloff, 1996; Yangarber et al., 2000)", "Brown et al. (2020)"): not its own
_CITED_YEAR = re.compile(r"(?:[A-Z][\w'\u2019-]+,|et\s+al\.?,?)\s+\(?(?:19|20)\d\d[a-z]?\)?(?=\s*[);,\]])")
_ACCESSION = re.compile(r"[\d\-_.\s]+")
_MONTH = r"(?:january|february|march|april|may|june|july|august|september|october|november|december)"
# a line that dates or files a document and names no one: "For the fiscal year ended December 31, 2018",
# "ANNUAL REPORT PURSUANT TO SECTION 13 ...", "Commission file number 1-3285", "December 31, 2018"
_NO_ENTITY = re.compile(
    rf"^(?:for\s+the\b|fiscal\s+year\b|(?:annual|quarterly|transition)\s+report\s+pursuant\b|commission\s+file\b|"
    rf"\(?exact\s+name\b|{_MONTH}\s+\d{{1,2}},?\s+\d{{4}}$|\d{{4}}$)|\bended\s+{_MONTH}\b", re.I)
# a company printed on the cover: "3M COMPANY", "Acme Holdings, Inc."
COMPANY_LINE = re.compile(r"^([A-Z0-9][A-Za-z0-9&.,' \-]{0,60}?\b(?:COMPANY|Company|CORPORATION|Corporation|INC\.?|Inc\.?|"
                           r"CORP\.?|Corp\.?|LTD\.?|Ltd\.?|PLC|plc|LLC|N\.V\.|S\.A\.|AG|SE))\s*$", re.M)


# a heading that says what kind of document this is and names none ("Maintenance Log", "Clinical Study Protocol",
# "Annual Performance Report", "Research Proposal Form"): true of many documents, so it is no name; a page-1 heading
# that is a numbered section ("6.4 Internal PXC") says the file starts inside a larger document
_KIND_WORDS = frozenset(
    "annual quarterly monthly weekly daily final factual interim draft revised updated official general main "
    "performance strategic research clinical study protocol proposal report reports form forms log maintenance manual "
    "guide handbook user users owner owners instructions instruction notes note memo memorandum letter agenda minutes "
    "plan plans summary executive overview introduction preface contents appendix chapter section part abstract corporate "
    "company document documents example examples sample figures figure tables table data sheet fact facts brochure "
    "presentation slides slide deck questionnaire survey topline methodology results statement statements release "
    "press news newsletter bulletin notice application agreement license terms conditions policy policies "
    "information heading title level page pages only use office official schedule exhibit attachment supplement "
    "fiscal year years financial highlights review update program programme project draft version edition volume "
    "the of for and a an to in on by with at from its our your this".split())
_MASTHEAD = re.compile(r"^(?:the\s+)?(?:journal|proceedings|transactions|annals|bulletin|letters|review)\s+(?:of|on|in)\b"
                       r"|\b(?:journal|review|letters|transactions)$", re.I)
_SECTION_HEAD = re.compile(r"^\s*(?:\d+(?:\.\d+)*\.?|[IVX]+\.)\s+[A-Za-z]")
NEUTRAL_PREFIX = "the document whose first page is headed "
NEUTRAL = re.compile(NEUTRAL_PREFIX + "\u201c[^\u201d]{1,160}\u201d")


def generic_title(title: str) -> bool:
    """A heading that names no document: only words for a kind of document, or a numbered section's heading."""
    words = re.findall(r"[a-z]{2,}", title.lower())
    return bool(_SECTION_HEAD.match(title)) or all(w in _KIND_WORDS or w in _GENERIC for w in words)


def neutral_reference(heading: str) -> str:
    """A true reference to a document whose first page's heading is no confirmed name: "the document whose first
    page is headed “Maintenance Log”"; "" when the heading is no short line of words a reader can find."""
    h = clean_text(heading)  # quoted as printed
    if not h or len(h.split()) > 12 or not re.search(r"[A-Za-z]{3,}", h) or re.search(r"www\.|https?:|@|\[|=|[\u201c\u201d]", h):
        return ""
    if re.fullmatch(r"(table\s+of\s+)?contents|index", h.strip(), re.I):  # a contents link heads no document
        return ""
    field = re.match(r"^\w+(?:\s\w+)?:\s*(.+)$", h)  # "Date: February 12, 2025": a letter's date field
    if field and (_NO_ENTITY.match(field.group(1).strip()) or re.fullmatch(r"[\d./\- ]+", field.group(1).strip())):
        return ""
    if re.match(r"(table|figure|fig\.)\s+[\dIVX]+\b|\d+\s+\d+\s", h, re.I) or _NO_ENTITY.search(h):  # a caption, a date
        # line, page numbers run into a header
        return ""
    return f"{NEUTRAL_PREFIX}\u201c{h}\u201d"


def names_an_entity(name: str) -> bool:
    """A name a reader knows the document by (a company, a title), not a date line, a form heading or a line of
    prose (a sentence cut at a line end, "Our failure to address these risks ... acquisitions and", or longer than
    a title)."""
    name = name.strip()
    if not name or _NO_ENTITY.search(name) or not re.search(r"[A-Za-z]{2,}", name):
        return False
    if re.search(r"www\.|https?:|@|\[|=|^\d+\s", name, re.I):  # a page header's address, a page number, a form's note
        return False
    if re.match(r"(table|figure|fig\.)\s+[\dIVX]+\b", name, re.I):  # a caption printed large on page 1
        return False
    words = name.split()
    cut = words[-1].lower() in {"and", "or", "of", "the", "to", "for", "with", "in", "on", "by", "a", "an", "that"}
    return not (cut or len(words) > MAX_TITLE_WORDS)


_MARKUP = re.compile(r"<\|?/?[A-Za-z_][^<>]{0,40}>|\[/?[A-Z]{2,8}\]|<<?/?SYS>>?")


def clean_text(text: str) -> str:
    """One line, no control characters or markup, hyphenation at line ends undone, cut to `MAX_CHARS`."""
    text = unicodedata.normalize("NFKC", text)  # a ligature ("Oﬀense") reads as its letters
    text = re.sub(r"(\w)-\s*\n\s*([a-z])", r"\1\2", text)  # "Inter-\nnational"; "Step-by-\nStep" keeps it
    text = re.sub(r"(\w)-\s*\n\s*(\w)", r"\1-\2", text)
    text = _MARKUP.sub(" ", text)  # a tag or chat token printed in a title names nothing
    text = re.sub(r"[\x00-\x1f\x7f]+", " ", text)
    text = " ".join(text.split())
    if len(text) > MAX_CHARS:  # cut at a word's end, marked: "... Stem Cell Dressing Principal I" named no one
        text = text[:MAX_CHARS].rsplit(" ", 1)[0].rstrip(" ,;:") + "\u2026"
    return text.strip(" ,;:")


def strip_boilerplate(text: str) -> str:
    """A title candidate without the page headers that name no document ("" when nothing else is left)."""
    rest = clean_text(_BOILERPLATE.sub(" ", text))
    return rest if len(re.findall(r"[A-Za-z]{2,}", rest)) >= 1 else ""


def _tidy(title: str) -> str:
    """A title without a bracketed code a typesetter left in it ("\uff0801,en\uff09", "[v2]")."""
    return " ".join(re.sub(r"\s*[\uff08\[]\s*[\w ,.\-]{0,12}[\uff09\]]\s*", " ", title).split())


def _case(name: str) -> str:
    """An all-capitals name as a reader writes it ("AMAZON.COM, INC." -> "Amazon.com, Inc.")."""
    if not name.isupper():
        return name
    return " ".join(w.capitalize() if len(w) > 1 and not re.search(r"\d", w) and not re.fullmatch(r"[IVX]+\.?,?", w)
                    else w for w in name.split())


def _printed(name: str, text: str) -> bool:
    """Whether `name`'s words stand in `text` in that order (case, punctuation and line ends aside)."""
    words = " ".join(re.findall(r"[a-z0-9]+", name.lower()))
    return bool(words) and f" {words} " in f" {' '.join(re.findall(r'[a-z0-9]+', text.lower()))} "


def readable_title(title: str) -> bool:
    """A metadata title worth quoting: words, not an accession number, file name or generator default."""
    t = title.strip()
    words = re.findall(r"[A-Za-z]{2,}", t)
    if not t or _ACCESSION.fullmatch(t) or len(words) < 2:
        return False
    if re.fullmatch(r"\S+", t) and "_" in t:  # a file name saved as the title ("odf_presentation")
        return False
    # a generator's default: "Microsoft Word - ...", "Untitled", PowerPoint's "PowerPoint Presentation"
    return not re.search(r"\.(docx?|pdf|indd|pptx?|od[tsp]|xlsx?)\b|^microsoft|^untitled|^powerpoint presentation$", t, re.I)


def sec_filing_name(text: str, largest: str = "") -> str:
    """"the Form 10-K of <registrant> for the fiscal year ended <date>", or "" when page 1 is no SEC filing.
    The registrant is the line above "(Exact name of registrant ...)", else the cover's largest type less its
    headers (a cover set as a table puts that caption elsewhere in the text)."""
    form, reg = _FORM.search(text), _REGISTRANT.search(text)
    after_file_no = _AFTER_FILE_NUMBER.search(text)  # a cover without the "(Exact name ...)" caption
    if not form or not (reg or re.search(r"Exact name of registrant", text, re.I) or after_file_no and _PERIOD.search(text)):
        return ""
    cands = [reg.group(1) if reg else "", after_file_no.group(1) if after_file_no and not reg else "", largest,
             *(m.group(1) for m in COMPANY_LINE.finditer(text))]
    company = next((_case(clean_text(strip_boilerplate(c))) for c in cands
                    if strip_boilerplate(c) and names_an_entity(strip_boilerplate(c))), "")
    period = _PERIOD.search(text)
    if period:
        when = f" for the {period.group(1).lower()} ended {' '.join(period.group(2).split())}"
    else:
        dated = _REPORT_DATE.search(text)
        when = f" dated {' '.join(dated.group(1).split())}" if dated else ""
    return clean_text(f"the Form {form.group(1)} of {company}{when}") if company else ""


def document_label(first_page_text: str, meta_title: str = "", title_blocks: list[str] = (),  # type: ignore[assignment]
                   largest: str = "") -> str:
    """How a question names its document (company, report, period or year); "" when page 1 says nothing usable.
    `largest` = page 1's largest-font text (`largest_font_text`), a paper's or press release's title."""
    sec = sec_filing_name(first_page_text, largest)
    if sec:
        return sec
    cited = _CITATION.search(first_page_text)
    big = strip_boilerplate(largest)
    meta = strip_boilerplate(meta_title) if readable_title(meta_title) else ""
    if cited:  # the title the publisher asks to be cited by
        title = clean_text(cited.group(1))
    elif meta and _MASTHEAD.match(big) and names_an_entity(meta) and not generic_title(meta) \
            and _printed(meta, first_page_text):  # a journal's masthead set larger than the paper's title
        title = meta
    elif big and len(re.findall(r"[A-Za-z]{3,}", big)) >= 2 and names_an_entity(big) and not generic_title(big):
        title = big  # page 1's largest type: its title
    elif big:  # a generic heading, a section's heading: the metadata title when page 1 prints it, else the heading
        if not (meta and names_an_entity(meta) and not generic_title(meta) and _printed(meta, first_page_text)):
            return neutral_reference(big)
        title = meta
    else:  # no font information (a moved source): the layout model's title block, else a readable metadata title
        blocks = [strip_boilerplate(b) for b in title_blocks]
        blocks = [b for b in blocks if len(re.findall(r"[A-Za-z]{3,}", b)) >= 2 and names_an_entity(b)]
        if blocks:
            title = blocks[0]
        elif readable_title(meta_title) and strip_boilerplate(meta_title) and (
                not first_page_text or _printed(strip_boilerplate(meta_title), first_page_text)):
            title = strip_boilerplate(meta_title)  # a metadata title page 1 does not print is a file's label
        else:
            return ""
        if generic_title(title):
            return ""
    if title.rstrip().endswith("?"):  # a question set large (a flyer's hook, a survey's first question) is a
        return neutral_reference(title)  # heading, not the document's name
    title = _tidy(title)  # as printed: re-casing "FY 2019 GSA OCSIT" gave "Fy 2019 Gsa Ocsit"
    # the year of publication: the last year on a line that dates the document (a stamp, a copyright, a citation:
    # "arXiv:2004.04906v3 [cs.CL] 30 Sep 2020" is from 2020, not 2004); none without such a line (the first year
    # a page prints is as often a degree's, a founding's or a cited work's)
    dated = re.search(r"(arXiv|\u00a9|copyright|proceedings|published|citation)[^\n]{0,120}", first_page_text, re.I)
    years = _YEAR.findall(_CITED_YEAR.sub(" ", dated.group(0))) if dated else []
    year = years[-1] if years else ""
    return f"\u201c{title}\u201d ({year})" if year and year not in title else f"\u201c{title}\u201d"


_GENERIC = frozenset(
    "the form of for and fiscal year quarterly period ended dated report annual inc corp co company ltd plc llc "
    "group holdings january february march april may june july august september october november december "
    "results quarter com www document whose first page headed".split())


def label_terms(label: str) -> set[str]:
    """The words of a label that tell one document from another (a company, a title word), lower-cased and split
    on anything not a letter or digit (as `writer.check_question` reads questions); numbers and generic words out."""
    words = re.sub(r"[^0-9a-z]+", " ", label.lower()).split()
    return {w for w in words if len(w) >= 3 and not w.isdigit() and w not in _GENERIC}
