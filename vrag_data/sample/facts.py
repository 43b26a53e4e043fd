"""Seeded facts for the synthetic corpus: one fictional company per document.

Everything here is pure: the same `random.Random` state gives the same facts. Company names are unique
within a corpus so that every question (which names its company) has exactly one answer.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

PREFIXES = (
    "Aldera", "Brightwave", "Corvane", "Dunmore", "Elmstead", "Fenwick", "Glenhaven", "Harrowgate", "Ironvale",
    "Juniper", "Kestrel", "Larkspur", "Marlowe", "Northwind", "Oakridge", "Pinecrest", "Quillon", "Redfern",
    "Silverline", "Thornbury", "Umberly", "Veridian", "Westbrook", "Yarrow", "Zephyra",
)
SUFFIXES = ("Analytics", "Logistics", "Energy", "Foods", "Robotics", "Textiles", "Pharma", "Systems", "Maritime",
            "Mining")
FIRST = ("Amara", "Bruno", "Chiara", "Dmitri", "Elena", "Farid", "Greta", "Hiro", "Ines", "Jonas", "Keira", "Luca",
         "Mei", "Nadia", "Oskar", "Priya", "Rafael", "Sofia", "Tomas", "Wen")
LAST = ("Almeida", "Brandt", "Castillo", "Dubois", "Eriksen", "Fischer", "Gallo", "Haddad", "Ivanova", "Jensen",
        "Kowalski", "Lindqvist", "Moreau", "Nakamura", "Okafor", "Petrov", "Quintero", "Rossi", "Sato", "Varga")
CITIES = ("Aberdeen", "Bilbao", "Calgary", "Dresden", "Eindhoven", "Fukuoka", "Gdansk", "Hobart", "Izmir", "Jaipur",
          "Krakow", "Leipzig", "Malmo", "Nantes", "Osaka", "Porto", "Quebec", "Rotterdam", "Seville", "Tampere",
          "Utrecht", "Valencia", "Winnipeg", "Zagreb")
REGIONS = ("North America", "Europe", "Asia Pacific", "Latin America", "Middle East", "Africa")
SEGMENTS = ("Retail", "Wholesale", "Services", "Licensing", "Online", "Government")
METRICS = ("Revenue", "Operating costs", "Net income", "R&D spending", "Capital expenditure")
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December")


def fmt_int(v: int) -> str:
    return f"{v:,}"


@dataclass
class CompanyFacts:
    name: str
    kind: str  # "report" (portrait) or "slides" (landscape)
    founded: int
    hq_city: str
    ceo: str
    headcount: int
    offices: int
    years: list[int]
    table_metrics: list[str]
    table: dict[str, dict[int, int]]  # metric -> year -> USD millions
    bar_year: int
    bar: dict[str, int]  # region -> units sold (thousands)
    line: dict[str, int]  # quarter label -> monthly active users (thousands)
    pie_year: int
    pie: dict[str, int]  # segment -> % of revenue, sums to 100
    memo_city: str
    memo_month: str
    memo_shipments: int
    memo_audit_score: int
    charts: list[str] = field(default_factory=list)  # which charts this document shows
    has_scan: bool = False


def company_names(rng: random.Random, n: int) -> list[str]:
    combos = [f"{p} {s}" for p in PREFIXES for s in SUFFIXES]
    # Prefer distinct prefixes so names are easy to tell apart; fall back to any unused combination.
    prefixes = rng.sample(PREFIXES, min(n, len(PREFIXES)))
    names = [f"{p} {rng.choice(SUFFIXES)}" for p in prefixes]
    rest = [c for c in combos if c not in names]
    rng.shuffle(rest)
    names += rest[: max(0, n - len(names))]
    if len(names) < n:  # more documents than combinations: number the extra ones
        names += [f"{combos[i % len(combos)]} {i // len(combos) + 1}" for i in range(len(names), n)]
    return names


def _distinct_ints(rng: random.Random, k: int, lo: int, hi: int) -> list[int]:
    return rng.sample(range(lo, hi), k)


def _pie_shares(rng: random.Random, k: int) -> list[int]:
    """k distinct integer percentages >= 5 that sum to 100."""
    while True:
        cuts = sorted(rng.sample(range(1, 100), k - 1))
        shares = [b - a for a, b in zip([0, *cuts], [*cuts, 100])]
        if min(shares) >= 5 and len(set(shares)) == k:
            return shares


def make_facts(rng: random.Random, name: str, kind: str, years: list[int]) -> CompanyFacts:
    metrics = ["Revenue", *rng.sample(METRICS[1:], rng.randint(2, 3))]
    table: dict[str, dict[int, int]] = {}
    for m in metrics:
        lo, hi = (800, 9800) if m == "Revenue" else (40, 780)
        table[m] = dict(zip(years, _distinct_ints(rng, len(years), lo, hi)))
    regions = rng.sample(REGIONS, rng.randint(4, 5))
    quarters_start = rng.choice(years[:-1])
    quarters = [f"Q{q} {y}" for y in (quarters_start, quarters_start + 1) for q in (1, 2, 3, 4)][: rng.randint(6, 8)]
    segments = rng.sample(SEGMENTS, rng.randint(3, 5))
    cities = rng.sample(CITIES, 2)
    charts = rng.sample(["bar", "line", "pie"], rng.randint(1, 3))
    return CompanyFacts(
        name=name,
        kind=kind,
        founded=rng.randint(1952, 2009),
        hq_city=cities[0],
        ceo=f"{rng.choice(FIRST)} {rng.choice(LAST)}",
        headcount=rng.randint(1200, 48000),
        offices=rng.randint(3, 40),
        years=years,
        table_metrics=metrics,
        table=table,
        bar_year=rng.choice(years),
        bar=dict(zip(regions, _distinct_ints(rng, len(regions), 110, 980))),
        line=dict(zip(quarters, _distinct_ints(rng, len(quarters), 150, 990))),
        pie_year=rng.choice(years),
        pie=dict(zip(segments, _pie_shares(rng, len(segments)))),
        memo_city=cities[1],
        memo_month=rng.choice(MONTHS),
        memo_shipments=rng.randint(1100, 9800),
        memo_audit_score=rng.randint(61, 99),
        charts=charts,
    )


FILLER = (
    "The board reviewed the plan for the coming year and approved the proposed budget.",
    "Management continued to invest in training programmes for staff in every office.",
    "Customer satisfaction surveys were carried out twice during the reporting period.",
    "The company expects demand to remain stable across its main markets.",
    "Supply chain partners were assessed against the updated code of conduct.",
    "Several internal systems were migrated to a new platform without service interruptions.",
    "The sustainability committee met four times and published its minutes internally.",
    "New safety procedures were introduced at all production and storage sites.",
    "The finance team completed the transition to quarterly rolling forecasts.",
    "A review of office energy use identified savings that will be realised next year.",
)


def filler_sentences(rng: random.Random, k: int) -> list[str]:
    return rng.sample(FILLER, min(k, len(FILLER)))
