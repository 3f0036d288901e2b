"""An xdist scheduler for `--dist loadscope` that lets each long pole run alone on its worker.

xdist's own loadscope scheduler tops a worker up with the next module as soon as two or fewer of its
tests are pending. On the worker of a long pole (a module whose last tests take minutes) that next
module waits behind the pole while the other workers run dry, and the suite ends minutes after the
work could have. Here a worker gets more work only once its pole is down to its last test. Not none:
an xdist worker starts a test only once it knows the next one (or is told to stop), so the last test
of a pole waits for more work; a pole module therefore ends with a short test.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdist.scheduler import LoadScopeScheduling  # type: ignore[import-untyped]
from xdist.workermanage import WorkerController  # type: ignore[import-untyped]


class PolesAloneScheduling(LoadScopeScheduling):  # type: ignore[misc]  # xdist ships no type hints
    """loadscope, except that a worker running a long-pole module is given nothing else until the
    pole's last test."""

    poles: Sequence[str] = ()

    def _busy_with_a_pole(self, node: WorkerController) -> bool:
        return any(
            # loadscope's scope of a test in a class is `module::Class`: the pole is the module.
            scope.split("::")[0] in self.poles and list(done.values()).count(False) > 1
            for scope, done in self.assigned_work.get(node, {}).items()
        )

    def _reschedule(self, node: WorkerController) -> None:
        if self.workqueue and self._busy_with_a_pole(node):
            return
        super()._reschedule(node)
