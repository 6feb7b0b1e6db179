"""A provider switch that failed: what a chat reads and what the operator reads."""

from __future__ import annotations

from nanobot_memory_adapters.nanobot.audience import Piece


class SwitchFailed(Exception):
    """A ``/memory-mode NAME`` whose provider could not be built. The build's error is a
    backend's text (its body can quote a stored turn), so the reply carries it as operator
    text: a chat reads that the switch failed, nanobot's terminal (and the log) why."""

    def __init__(self, name: str, cause: BaseException, still: str | None) -> None:
        super().__init__(f"cannot switch to '{name}': {cause}")
        self.name, self.cause, self.still = name, cause, still or "nanobot memory"
        self.then: list[str] = []  # what did not happen because of it (a backfill)

    def pieces(self) -> list[Piece]:
        return [Piece.plain(f"cannot switch to '{self.name}': the provider could not be "
                            "built."),
                Piece.operator(str(self.cause), withheld="(the gateway's log has the error)"),
                Piece.plain(f"Still using '{self.still}' (it reconnects on next use)"),
                *(Piece.plain(line) for line in self.then)]

    def operator_text(self) -> str:
        return "\n".join([f"{self}. Still using '{self.still}' (it reconnects on next use)",
                          *self.then])
