"""The dataset card (README.md): statistics and provenance of an export, and each format's own section.

`card_body` is the card without its YAML header: the export folder's README.md puts the tags above it, a format
that publishes its own card (HF: `hf/README.md`) puts its own header above it (`front_matter`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

_TAGS = """tags:
- visual-rag
- agent-trajectories
- vrag-data
---
"""


def front_matter(counts: dict[str, int], files: dict[str, list[str]] | None = None, license: str | None = None,
                 image_folder: str = "") -> str:
    """The card's YAML header: the licence (`other` when unknown: the card's body says so), one config per record type
    that has rows (`sft` is the default when present), each naming its shard files per split (`files` keyed
    `<type>/<split>`, or `<type>` for one train split); `datasets` cannot read an empty parquet file, so an empty
    record type or split is not declared. With `image_folder` the shards are metadata files of `datasets`'
    `imagefolder` builder: each split also names the folder's images, and the config names its metadata files."""
    files = files or {}
    names = [n for n in ("sft", "rl") if counts.get(n)]
    lines = ["---", "configs:"] if names else ["---"]
    for i, name in enumerate(names):
        lines.append(f"- config_name: {name}")
        if i == 0:
            lines.append("  default: true")
        splits = {k.split("/", 1)[1]: v for k, v in files.items() if k.startswith(name + "/")}
        splits = splits or {"train": files.get(name) or [f"data/{name}-*.parquet"]}
        lines.append("  data_files:")
        for split in sorted(splits, key=lambda x: (x != "train", x)):
            paths = splits[split] + ([f"{image_folder}/*"] if image_folder else [])
            lines += [f"  - split: {split}", "    path:"] + [f"    - {f}" for f in paths]
        if image_folder:
            lines += ["  drop_labels: true", "  metadata_filenames:"]
            lines += [f"  - {f.rsplit('/', 1)[-1]}" for split in sorted(splits) for f in splits[split]]
    lines.append(f"license: {license or 'other'}")
    return "\n".join(lines) + "\n" + _TAGS


RESEARCH = "research"  # a source licence naming it (e.g. "research-only") may not be published without consent

# what each column of the HF configs holds (the card's "Columns" section)
COLUMNS = {
    "sft": {
        "id": "record id (`<traj_id>` or `<traj_id>:<agent>`)", "recipe": "recipe that produced the trajectory",
        "task_id": "task the trajectory answers", "traj_id": "source trajectory", "system": "system prompt",
        "messages": "user/assistant turns; observations are user turns; one `<image>` per image",
        "images": "the turns' images in order", "augmentation": "augmentation that derived the record, if any",
        "metadata": "JSON: status, sample, policy, model family, box conversions, split",
    },
    "rl": {
        "id": "`<task_id>:<recipe>`", "data_source": "reward dispatch key (VRAG-RL's names where they apply)",
        "prompt": "chat messages of the episode's start; one `<image>` per image", "images": "the prompt's images",
        "ability": "task family", "reward_model": "`style` and `ground_truth` (gold answer, or EVisRAG's tagged target)",
        "extra_info": "question, answer, answer_format, gold_pages, gold_boxes (JSON, 0-1000), recipe, reward, "
                      "coord_space, max_pixels, page_sizes (JSON), task_id, index, split, shown_pages, sufficient, and "
                      "the rollout's search_results, selections, read_pages (empty: the agent loop fills them)",
        "document_file": "gold document `<stem>.pdf` (`file_name` in verl/, where VRAG-RL reads it)", "reference_page": "its 1-based gold pages",
    },
}


def source_licenses(sources: dict[str, list[str]], known: dict[str, str]) -> dict[str, dict[str, str]]:
    """kind ("documents", "benchmarks") -> name -> licence ("unknown" when the config names none)."""
    return {kind: {n: known.get(n, "unknown") for n in names} for kind, names in sources.items()}


def publish_problems(license: str | None, licenses: dict[str, dict[str, str]], allow_research_only: bool) -> list[str]:
    """Why an export may not be published as it is (empty: it may)."""
    out = [] if license else ["the export has no licence: set export.license (or --license)"]
    if not allow_research_only:
        for kind, named in sorted(licenses.items()):
            bad = sorted(n for n, lic in named.items() if lic == "unknown" or RESEARCH in lic.lower())
            if bad:
                out.append(f"{kind} {bad[:5]} are research-only or of unknown licence: name them in "
                           "export.source_licenses, or set export.allow_research_only (--allow-research-only)")
    return out


def _license_section(prov: dict[str, Any]) -> list[str]:
    lic = prov.get("license")
    lines = ["\n## Licence and sources\n",
             f"- licence of this export: {lic or 'unknown (not fit to publish: set export.license)'}\n"]
    for kind, named in sorted((prov.get("source_licenses") or {}).items()):
        lines.append(f"\n### Source {kind}\n\n")
        lines.append(_table(named, (kind.rstrip("s"), "licence")))
    if prov.get("publish_problems"):
        lines.append("\n> **Not fit to publish as is.** " + "; ".join(prov["publish_problems"]) + ".\n")
    return lines


def _splits_section(splits: dict[str, dict[str, dict[str, int]]]) -> list[str]:
    if not splits:
        return []
    lines = ["\n## Splits\n\n",
             "A task's own split (a benchmark's `test`) is kept apart: its records are never in a training file. "
             "`val` holds train tasks held out for RL validation. LLaMA-Factory files hold train tasks only.\n\n",
             "| format/type | split | records |\n|---|---|---|\n"]
    for fmt, types in sorted(splits.items()):
        for typ, per in sorted(types.items()):
            lines += [f"| {fmt}/{typ} | {split} | {n} |\n" for split, n in sorted(per.items())]
    return lines


def _columns_section() -> list[str]:
    lines = ["\n## Columns\n"]
    for config, cols in COLUMNS.items():
        lines.append(f"\n### `{config}`\n\n")
        lines.append(_table(cols, ("column", "holds")))
    return lines


def _table(rows: dict[str, Any], head: tuple[str, str]) -> str:
    if not rows:
        return "_none_\n"
    lines = [f"| {head[0]} | {head[1]} |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in sorted(rows.items())]
    return "\n".join(lines) + "\n"


def run_roles(manifest_config: dict[str, Any] | None) -> dict[str, Any]:
    """What the card's "Roles" section shows, from the run manifest: each role's model (or `rules`, `oracle`,
    `extractive`, or its substitution `... (same_as policy)`), and the difficulty filter's `missing` setting when
    it is not "fail" (the rule was skipped for tasks without a student answer). Empty for a run without a manifest."""
    from vrag_data.config import RoleConfig
    from vrag_data.teacher.roles import describe_roles

    cfg = manifest_config or {}
    played = dict(cfg.get("roles_played") or {})
    if not played and cfg.get("roles"):  # manifests written before roles were recorded as configured
        try:
            played = describe_roles({k: RoleConfig.model_validate(v) for k, v in cfg["roles"].items()})
        except Exception:  # noqa: BLE001 - an unreadable old manifest leaves the section without roles
            played = {}
    # the SFT chain's and the RL chain's difficulty filter, as the recipe set them, then as the config overrode them
    recipe, filters = cfg.get("recipe") or {}, cfg.get("filters") or {}
    missing = None
    for settings, key in (("filter_settings", "options"), ("rl_filter_settings", "rl_options")):
        own = ((recipe.get(settings) or {}).get("difficulty") or {}).get("missing")
        for opts in (filters.get(key) or {}).values():
            own = (opts.get("difficulty") or {}).get("missing", own)
        if own and own != "fail":
            missing = own
    out: dict[str, Any] = {"roles": played, "role_substitutions": dict(cfg.get("role_substitutions") or {})}
    if missing and missing != "fail":
        out["difficulty_missing"] = missing
    return out


def _roles_section(prov: dict[str, Any]) -> list[str]:
    played = prov.get("roles") or {}
    if not played and not prov.get("difficulty_missing"):
        return []
    lines = ["\n## Roles\n", "Who played each role of the run (`same_as`: a role configured to be another one).\n\n"]
    lines += [f"- {role}: {what}\n" for role, what in sorted(played.items())]
    subs = prov.get("role_substitutions") or {}
    if subs:
        lines.append("- substitutions: " + ", ".join(f"{r} is the {o}" for r, o in sorted(subs.items())) + "\n")
        if subs.get("judge") == "policy":
            lines.append("\n> **Self-judged.** The judge is the policy's own model: correctness verdicts were given by the "
                         "model that wrote the answers. Check the report's `answers_vs_gold` view.\n")
    if prov.get("difficulty_missing"):
        lines.append(f"- difficulty filter `missing: {prov['difficulty_missing']}`: tasks without a student answer were "
                     f"{'kept' if prov['difficulty_missing'] == 'keep' else 'dropped'} without the rule being applied\n")
    return lines


def _gate_section(stopped: dict[str, dict[str, int]], rules: dict[str, dict[str, Any]]) -> list[str]:
    """What each recipe's gate checked, and the records it stopped (never written to any format)."""
    lines = ["\n### The recipe's gate\n",
             "Every SFT record and RL row was checked before it was written: each training target parses under the "
             "recipe's grammar and was accepted (not truncated, not off-format, no error prompt after it), no control "
             "characters, every box inside its page, plus the recipe's own rules below.\n"]
    for recipe, r in sorted(rules.items()):
        own = [f"requires {', '.join(r['requires'])}" if r.get("requires") else "",
               "saw a retrieved page" if r.get("saw_pages") else "",
               f"at most {r['max_assistant_turns']} assistant turn(s)" if r.get("max_assistant_turns") else "",
               "trains on retries" if r.get("trains_retries") else ""]
        n = sum((stopped.get(recipe) or {}).values())
        lines.append(f"- `{recipe}` ({r.get('source', '')}): {'; '.join(x for x in own if x) or 'the common rules only'}; "
                     f"stopped {n} record(s)" + (": " + ", ".join(f"{k}={v}" for k, v in sorted(stopped[recipe].items()))
                                                 if n else "") + "\n")
    return lines


def _targets_line(targets: dict[str, dict[str, int]]) -> str:
    return "; ".join(f"{r} {c.get('rendered', 0)} / {c.get('changed', 0)}" for r, c in targets.items()) or "none"


def card_body(summary: dict[str, Any], sections: Sequence[str] = ()) -> str:
    """The card's markdown; `sections` are the selected formats' card sections, in the export's order."""
    st = summary.get("stats", {})
    prov = summary.get("provenance", {})
    turns = st.get("turns", {})
    images = st.get("images", {})
    oracle = prov.get("oracle", False)
    parts = [
        f"# vrag-data export of run `{summary['run_id']}`\n",
        "Training data for agentic visual-RAG models (search, select, crop, answer over page images), "
        "built by vrag-data from the run's kept trajectories.\n",
    ]
    if oracle:
        parts.append(
            "> **Oracle policy.** Some or all trajectories were produced by the deterministic, gold-guided "
            "oracle policy, not by a model. Use them to test pipelines, not as teacher demonstrations.\n"
        )
    if prov.get("unfiltered"):
        parts.append(
            "> **Unfiltered.** The filter's verdicts were not applied (the run had none, or the export was asked for "
            "`--unfiltered`): every answered episode that passed the recipe's gate is here, wrong answers included.\n"
        )
    parts += [
        "## Contents\n",
        _table({f"{fmt}/{split}": n for fmt, c in summary.get("counts", {}).items() for split, n in c.items()}, ("format/split", "records")),
        *(["\n## Formats\n", *sections] if sections else []),
        "\n## Statistics\n",
        f"- trajectories in the run: {summary.get('n_trajectories', 0)}; kept: {summary.get('n_kept', 0)}\n",
        f"- model family (coordinates, image sizes): `{summary.get('model_family')}`\n",
        f"- assistant turns per SFT record: min {turns.get('min', 0)}, mean {turns.get('mean', 0):.2f}, max {turns.get('max', 0)}\n",
        f"- images: {images.get('references', 0)} references, {images.get('files', 0)} distinct files\n",
        f"- crop boxes converted to the family's coordinates: {st.get('boxes_converted', 0)}; left as written: {st.get('boxes_unconverted', 0)}\n",
        f"- assistant targets rendered from their parse under the recipe's grammar (rendered / differing from the stored "
        f"reply beyond whitespace): {_targets_line(st.get('targets') or {})}\n",
        "\n### SFT records per recipe\n",
        _table(st.get("per_recipe", {}), ("recipe", "records")),
        "\n### Trajectories per finish status (whole run)\n",
        _table(st.get("per_status", {}), ("status", "trajectories")),
        "\n### Skipped records\n",
        _table(summary.get("skipped", {}), ("reason", "records")),
        "\nEach skipped record is listed with its reason in `skipped.jsonl`.\n",
        *_gate_section(st.get("gate") or {}, prov.get("gate") or {}),
        "\n## Provenance\n",
        f"- run id: `{summary['run_id']}`\n",
        f"- policy: {'oracle (gold-guided, not a model)' if oracle else 'model'}\n",
        f"- models: {', '.join(f'{k}={v}' for k, v in sorted(prov.get('models', {}).items())) or 'n/a'}\n",
        f"- recipes: {', '.join(sorted(st.get('per_recipe', {}))) or 'n/a'}\n",
        f"- config hash(es): {', '.join(prov.get('config_hashes', [])) or 'n/a'}\n",
        f"- code version(s) of the run: {', '.join(prov.get('code_versions', [])) or 'n/a'}; exporter: {prov.get('exporter_version', '')}\n",
    ]
    parts += _roles_section(prov)
    parts += _license_section(prov)
    parts += _splits_section(st.get("splits") or {})
    parts += _columns_section()
    if summary.get("warnings"):
        parts.append("\n## Warnings\n")
        parts += [f"- {w}\n" for w in summary["warnings"]]
    return "".join(parts)
