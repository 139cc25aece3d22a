"""Every kernel an LLM wrote during a generation (paid for), kept as files next to the task."""

from __future__ import annotations

from pathlib import Path

from optiml.generate.outcome import GenerationOutcome


def write_candidates(outcome: GenerationOutcome, folder: Path) -> int:
    """One file per kernel, ``<thought>-s<sample>-r<round>.cu``, headed by its status; how many."""
    count = 0
    for thought in outcome.thoughts:
        for attempt in thought.attempts:
            if attempt.kernel is None:
                continue
            folder.mkdir(parents=True, exist_ok=True)
            name = f"{thought.name}-s{attempt.sample}-r{attempt.round}.cu"
            header = f"// {attempt.status}: {attempt.message}\n"
            (folder / name).write_text(header + attempt.kernel.to_file_text(), encoding="utf-8")
            count += 1
    return count
