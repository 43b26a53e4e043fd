"""Filters as plugins: a filter defined outside the library, announced by a package's entry point or registered in
code, runs by name in a run config's chain; a filter that judges the answer says so, and its verdicts reach the
report's judge figures whatever it is called (a name list there left a new judge out, silently)."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import duckdb
import pytest

from tests.support.plugin_site import site_package
from tests.report_fixtures import build_report_workspace
from vrag_data.errors import ConfigError
from vrag_data.filters import (
    FILTERS,
    FilterChain,
    FilterContext,
    KeepPassed,
    apply_chain,
    configure_filters,
    known_filters,
    make_filter,
    register_filter,
    verdict,
)
from vrag_data.filters import registry as filter_registry
from vrag_data.report import build_report
from vrag_data.schema.records import Task, Trajectory, Verdict
from vrag_data.store.run import RunDir


@dataclass
class ExactAnswer(KeepPassed):
    """Passes when the final answer is the reference, character for character."""

    name: str = "exact_answer"
    judges_answers: ClassVar[bool] = True

    def score(self, item: Trajectory, ctx: FilterContext) -> Verdict:
        ok = (item.final_answer or "") == ctx.task(item).answer
        return verdict(item, self.name, ok, f"exact: {item.final_answer!r}", 1.0 if ok else 0.0)


@pytest.fixture
def exact_answer():
    register_filter(ExactAnswer)
    yield ExactAnswer
    FILTERS.pop("exact_answer", None)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return build_report_workspace(tmp_path_factory.mktemp("report") / "ws")


def _pair(built) -> tuple[list[Trajectory], dict[str, Task]]:
    """Two answered trajectories of the fixture and their tasks, the first task's answer set to its trajectory's."""
    answered = [t for t in built.trajectories if t.final_answer and t.run_id == "r1"]
    a = answered[0]
    b = next(t for t in answered if t.task_id != a.task_id)
    tasks = {t.task_id: t for t in built.tasks}
    ta = tasks[a.task_id].model_copy(update={"answer": a.final_answer})
    tb = tasks[b.task_id].model_copy(update={"answer": (b.final_answer or "") + " (not this)"})
    return [a, b], {ta.task_id: ta, tb.task_id: tb}


def test_a_registered_filter_runs_by_name_in_a_configured_chain_and_its_verdicts_say_they_judge(exact_answer, built):
    chain = FilterChain(configure_filters("vrag_rl", [make_filter("structure")], ["structure", "exact_answer"], None))
    assert chain.names == ["structure", "exact_answer"]
    trajs, tasks = _pair(built)
    kept, verdicts = apply_chain(trajs, tasks, FilterChain([make_filter("exact_answer")]))
    assert [t.traj_id for t in kept] == [trajs[0].traj_id]
    assert [(v.passed, v.judges_answer) for v in verdicts] == [(True, True), (False, True)]
    # a filter that does not judge the answer is stamped so too: a chain never leaves the flag unstated
    _, verdicts = apply_chain(trajs, tasks, FilterChain([make_filter("structure")]))
    assert len(verdicts) == 2 and all(v.judges_answer is False for v in verdicts)


def test_register_refuses_a_taken_name_and_an_object_that_is_no_filter(exact_answer):
    @dataclass
    class Other(KeepPassed):
        name: str = "exact_answer"

        def score(self, item, ctx):  # pragma: no cover - never run
            raise AssertionError

    class NotAFilter:
        name = "not_a_filter"

    with pytest.raises(ConfigError, match="'exact_answer' is taken by .*ExactAnswer"):
        register_filter(Other)
    with pytest.raises(ConfigError, match="no keep\\(\\) and score\\(\\)"):
        register_filter(NotAFilter)
    with pytest.raises(ConfigError, match="unknown filter\\(s\\) \\['exact_answr'\\]; known filters: .*exact_answer"):
        configure_filters("vrag_rl", [], ["exact_answr"], None)


def _site_package(tmp_path: Path, entry: str, module: str = "") -> Path:
    return site_package(tmp_path, "my_filters", "vrag_data.filters", entry, module)


def test_a_filter_announced_by_an_entry_point_is_one_module_and_one_line(tmp_path, monkeypatch, built):
    site = _site_package(tmp_path, "short_answer = my_filters:ShortAnswer", '''
        from dataclasses import dataclass
        from vrag_data.filters import KeepPassed, verdict

        @dataclass
        class ShortAnswer(KeepPassed):
            max_chars: int = 10
            name: str = "short_answer"

            def score(self, item, ctx):
                n = len(item.final_answer or "")
                return verdict(item, self.name, n <= self.max_chars, f"{n} chars")
    ''')
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.delitem(sys.modules, "my_filters", raising=False)
    monkeypatch.setattr(filter_registry.REGISTRY, "loaded", False)
    try:
        assert "short_answer" in known_filters()
        trajs, tasks = _pair(built)
        limit = min(len(t.final_answer or "") for t in trajs)
        f = configure_filters("vrag_rl", [], ["short_answer"], {"short_answer": {"max_chars": limit}})[0]
        kept, verdicts = apply_chain(trajs, tasks, FilterChain([f]))
        want = [t.traj_id for t in trajs if len(t.final_answer or "") <= limit]
        assert [t.traj_id for t in kept] == want and len(verdicts) == 2 and all(v.judges_answer is False for v in verdicts)
    finally:
        FILTERS.pop("short_answer", None)


def test_an_entry_point_that_cannot_be_loaded_stops_with_one_line_naming_it(tmp_path, monkeypatch):
    site = _site_package(tmp_path, "gone = no_such_filter_module:Gone")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setattr(filter_registry.REGISTRY, "loaded", False)
    with pytest.raises(ConfigError) as err:
        known_filters()
    msg = str(err.value)
    assert "no_such_filter_module:Gone" in msg and "'gone'" in msg and "\n" not in msg
    monkeypatch.setattr(filter_registry.REGISTRY, "loaded", True)


@pytest.mark.slow
def test_the_report_counts_a_new_judging_filter_and_not_a_non_judging_one(exact_answer, tmp_path):
    """The fixture's run r1 holds `correctness` verdicts written without the flag (counted as before); re-filtered
    through a chain of a new judging filter and a non-judging one, the judge figures are the new filter's, and the
    non-judging filter's rejections are not counted as judged."""
    built = build_report_workspace(tmp_path / "ws")
    before = build_report(built.ws, html=False)
    con = duckdb.connect(before.db_path, read_only=True)
    try:
        flags = dict(con.execute("SELECT filter, bool_or(is_judge) FROM verdicts GROUP BY filter").fetchall())
    finally:
        con.close()
    assert flags == {"correctness": True, "structure": False}

    trajs = [t for t in built.trajectories if t.run_id == "r1" and "augmentation" not in t.extra]
    tasks = {t.task_id: t for t in built.tasks}
    _, verdicts = apply_chain(trajs, tasks, FilterChain([make_filter("exact_answer"), make_filter("structure")]))
    judged = {v.traj_id: v.passed for v in verdicts if v.filter == "exact_answer"}
    assert judged and set(judged.values()) == {True, False}
    RunDir(built.ws.run("r1")).write_verdicts(verdicts)
    after = build_report(built.ws, html=False)
    con = duckdb.connect(after.db_path, read_only=True)
    try:
        flags = dict(con.execute("SELECT filter, bool_or(is_judge) FROM verdicts GROUP BY filter").fetchall())
        got = dict(con.execute("SELECT traj_id, judge_passed FROM trajectories WHERE run_id = 'r1' AND judge_passed IS NOT NULL "
                               "AND traj_id NOT LIKE 'r1-aug-%'").fetchall())
        n, passed = con.execute("SELECT sum(judged), sum(passed) FROM judge_pass_rate WHERE recipe = '(all)' "
                                "AND dimension = 'all'").fetchone()
    finally:
        con.close()
    assert flags == {"exact_answer": True, "structure": False}
    assert got == judged
    assert (n, passed) == (len(judged), sum(judged.values())), (n, passed)


def test_a_filter_has_one_name_its_class_s_and_the_verdicts_and_options_use_it(tmp_path):
    """Registered as 'auditor' while its verdicts said 'auditor_agreed', a filter had two names and the option key the
    drop hints printed was refused: the name now comes from the class, once."""

    @dataclass
    class AuditorAgreed(KeepPassed):
        threshold: float = 0.5
        name: str = "auditor_agreed"

        def score(self, item, ctx):  # pragma: no cover - never run
            raise AssertionError

    with pytest.raises(ConfigError, match=r"^register_filter\('auditor', \.\.\.\): a filter is registered under its own `name`"):
        register_filter("auditor", AuditorAgreed)  # type: ignore[arg-type]
    assert "auditor" not in known_filters()
    try:
        assert register_filter(AuditorAgreed) is AuditorAgreed and known_filters()["auditor_agreed"] is AuditorAgreed
        # the option key a drop hint names (filters.options.<recipe>.<verdict's filter>.<field>) is accepted
        f = configure_filters("vrag_rl", [], ["auditor_agreed"], {"auditor_agreed": {"threshold": 0.75}})[0]
        assert (f.name, f.threshold) == ("auditor_agreed", 0.75)
    finally:
        FILTERS.pop("auditor_agreed", None)
