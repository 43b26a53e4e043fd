"""Its export format: one tab-separated line per RL row (row id, reward, gold answer)."""

from vrag_data.export.formats import FormatContext, FormatDefaults, RlItem, Written, register_format


class _Writer:
    def __init__(self, ctx: FormatContext) -> None:
        self.path = ctx.out / "answers" / "rows.tsv"
        self.lines: list[str] = []

    def write_rl(self, item: RlItem) -> None:
        self.lines.append(f"{item.rec.id}\t{item.rec.extra_info['reward']}\t{item.task.answer}")

    def close(self) -> Written:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text("".join(line + "\n" for line in self.lines))
        return Written({"rl": len(self.lines)}, files={"rl": ["rows.tsv"]}, names_image_files=False)


class AnswersFormat(FormatDefaults):
    name, label, entry, sft, rl = "answers_tsv", "answers TSV", "answers/rows.tsv", False, True

    def open(self, ctx: FormatContext) -> _Writer:
        return _Writer(ctx)


FORMAT = register_format(AnswersFormat())
