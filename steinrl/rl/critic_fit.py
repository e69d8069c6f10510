"""A critic's own fit beside the policy's particle steps: :func:`fit_beside` starts it (on a second
thread with ``critic.overlap``, else it runs when :meth:`CriticFit.result` asks), touching only the
critic's own parameters and optimizer, so the numbers are those of a fit after the steps."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from functools import cache
from typing import TYPE_CHECKING

from torch import Tensor

from steinrl.core.finite import FiniteFlags
from steinrl.rl.draws import Draws
from steinrl.rl.samples import Samples

if TYPE_CHECKING:
    from steinrl.rl.critics import Critic

__all__ = ["CriticFit", "fit_beside"]


@cache
def _overlap_pool() -> ThreadPoolExecutor:
    """The one worker thread that runs critics' regressions beside the policy updates (``critic.overlap``)."""
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix="steinrl-critic")


class CriticFit:
    """A critic's own regression on an update's samples, beside the policy's particle steps
    (:func:`fit_beside`): with ``critic.overlap`` it runs on a second thread from the start,
    else in :meth:`result`, after the steps. Either way it touches only the critic's own
    parameters and optimizer (the same numbers).

    :param critic: the critic (not joint).
    :param call: the prepared fit (:meth:`Critic.prepare_fit`), returning the value loss ``(M,)``.
    :param finite: flags the value loss's finiteness per particle (optional).
    """

    def __init__(self, critic: Critic, call: Callable[[], Tensor], finite: FiniteFlags | None = None) -> None:
        self.critic, self.call, self.finite = critic, call, finite
        self.future: Future | None = _overlap_pool().submit(call) if critic.overlap else None
        critic.pending = self.future

    def result(self) -> Tensor:
        """The fit done (waited for, or run now): each particle's value loss ``(M,)``."""
        value_loss = self.call() if self.future is None else self.future.result()
        self.critic.pending = None
        if self.finite is not None:
            self.finite.add("value loss", value_loss)
        return value_loss


def fit_beside(critic: Critic, samples: Samples, draws: Draws, finite: FiniteFlags | None = None) -> CriticFit:
    """The critic's own regression on ``samples``, started beside the policy's steps (:class:`CriticFit`).

    What reads state the steps share (the observation normaliser, which they may bypass) is done
    now (:meth:`Critic.prepare_fit`); the fit's random regression columns, where the critic
    samples them, come through ``draws`` (``"critic_columns"``, each seed's ``critic`` stream)."""
    n = samples.mask.shape[1]
    columns = None
    if critic.samples_columns(n):
        columns = draws("critic_columns",
                        lambda iteration: critic.draw_columns(n, draws.generators("critic", iteration)))
    critic.settle()
    return CriticFit(critic, critic.prepare_fit(samples, columns), finite)
