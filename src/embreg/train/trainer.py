"""The one training loop: objective -> penalties -> backward -> update transforms -> clip -> step.

Reference: docs/architecture.md (the trainer's decisions: device, precision, data parallelism). The loop serves
every model that follows the protocol ``model(batch) -> ModelOutput`` and ``model.loss(batch, output) -> Tensor``.
"""

from __future__ import annotations

import copy
import math
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import torch
from torch import nn

from embreg.errors import ConfigError, TrainingError
from embreg.optim.optimizers import OptimizerFactory
from embreg.optim.schedules import SchedulerFactory, check_scheduler_state
from embreg.progress import progress
from embreg.regularizers.base import Objective, StepContext, standard_objective
from embreg.runs.run_dir import BEST_CHECKPOINT, LAST_CHECKPOINT, LEGACY_LAST_CHECKPOINT, RunDirectory
from embreg.runs.state_checks import check_best_state, check_resume_state
from embreg.sse.base import IndexTransform
from embreg.train.device import autocast, check_precision, model_device, move_batch, resolve_device
from embreg.train.distributed import (
    DistributedEnv,
    all_reduce_sums,
    broadcast_from_main,
    current,
    distributed_model,
    first_failed_rank,
    gather_to_main,
)
from embreg.train.finite import DIVERGENCE_HINT, non_finite_parameters
from embreg.train.host_draws import plan_host_draws
from embreg.train.resume import check_resumable
from embreg.train.seeding import rank_seed, seed_everything

__all__ = ["Trainer", "FitResult", "metric_prefix", "BEST_CHECKPOINT", "LAST_CHECKPOINT", "LEGACY_LAST_CHECKPOINT"]


def metric_prefix(split: str) -> str:
    """The prefix of a split's metric keys: ``valid`` -> ``val`` (``val_rmse``), others unchanged (``test_rmse``)."""
    return "val" if split == "valid" else split


class BatchSource(Protocol):
    def __len__(self) -> int: ...

    def epoch(self, epoch: int): ...


Evaluator = Callable[[nn.Module, str], dict[str, float]]
EpochCallback = Callable[["Trainer", dict[str, Any]], None]
StepCallback = Callable[["Trainer", dict[str, Any]], None]
"""Called after every optimizer step with ``{"step", "epoch", "train_loss", "lr"}`` (host numbers the step has
already read back: a step hook adds no device synchronisation)."""


@dataclass
class FitResult:
    """What :meth:`Trainer.fit` returns.

    Attributes:
        metrics: ``best_epoch``, ``epochs_run`` and every evaluated metric at the best epoch, prefixed by its split
            (``val_rmse``, ``test_rmse``, ...).
        history: one record per epoch (``epoch``, ``train_loss``, ``train_penalty``, ``seconds``, ``val_*``, ...).
    """

    metrics: dict[str, float]
    history: list[dict[str, Any]] = field(default_factory=list)

    @property
    def best_epoch(self) -> int:
        return int(self.metrics["best_epoch"])


STEP_LINES = 0.1
"""Off a terminal, an epoch's progress is a line per this share of its steps (:mod:`embreg.progress`)."""


class Trainer:
    """Trains a model with early stopping on a validation metric, checkpoints and exact resume.

    Each step: ``loss, output = objective(model, batch)``; ``loss += sum(r.penalty(ctx))``; backward; every
    ``r.after_backward(ctx)``; gradient-norm clipping; optimizer step. After each epoch the evaluator scores the
    validation split; the best model (by ``monitor``) is kept in ``best.safetensors``, and ``last.safetensors``
    holds everything needed to continue (model with its index-transform generators, optimizer, RNG state,
    counters, history). Both are written atomically, in the safetensors checkpoint format of
    :mod:`embreg.runs.checkpoint`, whose loading never runs code from the file. At the end the best model is
    scored on the validation and test splits.

    Args:
        model: the model (``forward(batch) -> ModelOutput``, ``loss(batch, output)``).
        optimizer: ``params -> optimizer`` (built after the regularisers' ``prepare``).
        batches: training batches (``len()`` and ``epoch(e)`` iterator, see :class:`TensorBatches`).
        evaluator: ``evaluator(model, split) -> {metric: value}``.
        epochs: maximum number of epochs.
        monitor: metric that selects the best epoch, e.g. ``"val_rmse"`` or ``"val_ndcg@10"``.
        mode: ``"min"`` or ``"max"`` for ``monitor``.
        patience: stop after this many evaluations without improvement (``None``: never stop early).
        min_epochs: early stopping may end the run only once this many epochs are done (a regulariser whose
            validation score is worst early, e.g. R~_approx, gets the time to recover).
        clip_norm: global gradient-norm clipping threshold (``None``: no clipping).
        regularizers: objects with any of ``prepare``, ``penalty``, ``after_backward``.
        objective: replaces the standard loss (e.g. Dropout_k).
        run_dir: where checkpoints, ``history.jsonl`` and ``metrics.json`` go (``None``: keep nothing on disk).
        val_split, test_split: split names passed to the evaluator (``test_split=None`` skips testing).
        eval_train: also score the training split after each epoch (for learning curves).
        progress: show progress on stderr: on a terminal, bars over epochs and over each epoch's steps; elsewhere (a
            log file, a pipe) plain lines, one per epoch and one per 10% of an epoch's steps
            (:mod:`embreg.progress`).
        callbacks: called as ``cb(trainer, record)`` after each epoch, once its checkpoint is written.
        step_callbacks: called as ``cb(trainer, record)`` after each optimizer step (:data:`StepCallback`), e.g.
            the loggers' per-step training loss and learning rate.
        device: where to train (``"auto"``, ``"cpu"``, ``"cuda"``, ``"cuda:N"`` or a ``torch.device``; ``None``:
            where the model already is). The model is moved there once; each batch's tensors once per step.
            Evaluators get the model on this device and put their inputs where its parameters are.
        precision: ``"fp32"``; ``"bf16"`` (autocast of the forward pass and penalties to bfloat16, CPU or CUDA);
            ``"fp16"`` (autocast to float16 with a ``torch.amp.GradScaler``, CUDA only). Parameters, optimizer
            state and evaluation stay in float32.
        fused_step: train with the model's fused step (``model.fused_step(optimizer)``: forward, loss, backward and
            update in one call, e.g. :mod:`embreg.models.mf_fused_step`) instead of autograd; it computes the same
            step, so it takes no objective other than the standard one, no regularisers, no clipping, fp32 on the
            CPU in one process. Where the model's kernel cannot be built the autograd step runs (after a warning).
        scheduler: ``(optimizer, steps_per_epoch) -> LRScheduler`` (:mod:`embreg.optim.schedules`), stepped after
            every optimizer step; its state is saved in ``last.safetensors`` and restored on resume (``None``: none).
        index_transforms_on: where the model's index transforms (SSE) draw in training (:mod:`embreg.train.host_draws`):
            ``"auto"`` (on the CPU batch before its copy when training on CUDA, where the model allows it; else in the
            forward pass), ``"host"`` or ``"device"``. The swaps' law is the same either way.
        distributed: the data-parallel process group's view (``None``: the running one, see
            :mod:`embreg.train.distributed`). With more than one process the steps run through
            DistributedDataParallel on this process's shard of the batches (``batches.sharded``), rank 0 alone
            evaluates (its metrics are broadcast) and writes ``run_dir``, and ``last.safetensors`` holds every
            rank's random state.

    Example:
        >>> from embreg.models import BiasedMF
        >>> from embreg.batching.batches import TensorBatches
        >>> from embreg.tasks.ratings.evaluation import RatingEvaluator
        >>> from embreg.optim.optimizers import optimizer_factory
        >>> data = {"user": torch.tensor([0, 1, 1]), "item": torch.tensor([0, 0, 1]), "rating": torch.tensor([4., 3., 5.])}
        >>> trainer = Trainer(BiasedMF.build(2, 2, 4, global_mean=4.0), optimizer_factory("adam", 0.01),
        ...                   TensorBatches(data, batch_size=2), RatingEvaluator({"valid": data, "test": data}),
        ...                   epochs=2, progress=False)
        >>> sorted(trainer.fit().metrics)[:3]
        ['best_epoch', 'epochs_run', 'test_mae']
    """

    def __init__(
        self,
        model: nn.Module,
        optimizer: OptimizerFactory,
        batches: BatchSource,
        evaluator: Evaluator,
        *,
        epochs: int,
        monitor: str = "val_rmse",
        mode: str = "min",
        patience: int | None = None,
        min_epochs: int = 0,
        clip_norm: float | None = None,
        regularizers: Sequence[Any] = (),
        objective: Objective = standard_objective,
        run_dir: str | Path | None = None,
        val_split: str = "valid",
        test_split: str | None = "test",
        eval_train: bool = False,
        progress: bool = True,
        callbacks: Sequence[EpochCallback] = (),
        step_callbacks: Sequence[StepCallback] = (),
        device: str | torch.device | None = None,
        precision: str = "fp32",
        distributed: DistributedEnv | None = None,
        fused_step: bool = False,
        index_transforms_on: str = "auto",
        scheduler: SchedulerFactory | None = None,
    ) -> None:
        if epochs < 1:
            raise ValueError(f"epochs={epochs} must be >= 1")
        if mode not in ("min", "max"):
            raise ValueError(f"mode={mode!r} must be 'min' or 'max'")
        if not monitor.startswith(f"{metric_prefix(val_split)}_"):
            raise ValueError(
                f"monitor={monitor!r} must name a validation metric, e.g. '{metric_prefix(val_split)}_rmse'"
            )
        if patience is not None and patience < 1:
            raise ValueError(f"patience={patience} must be >= 1 or None")
        if not 0 <= min_epochs <= epochs:
            raise ValueError(f"min_epochs={min_epochs} must be in [0, epochs={epochs}]")
        if clip_norm is not None and clip_norm <= 0:
            raise ValueError(f"clip_norm={clip_norm} must be > 0 or None")
        self.dist = current() if distributed is None else distributed
        self.device = model_device(model) if device is None else resolve_device(device)
        if self.dist.active and self.device.type == "cuda" and device in ("auto", "cuda", None):
            self.device = torch.device("cuda", self.dist.local_rank)  # one GPU per process
        check_precision(precision, self.device)
        self.precision = precision
        # fp16 needs loss scaling so that small gradients do not underflow; bf16 has fp32's range and needs none.
        self._scaler = torch.amp.GradScaler(self.device.type) if precision == "fp16" else None
        model = model.to(self.device)  # before ``prepare``: regularisers snapshot weights on the training device
        self.regularizers = list(regularizers)
        for regularizer in self.regularizers:
            if hasattr(regularizer, "prepare"):
                model = regularizer.prepare(model)
        self.model = model.to(self.device)  # and after: ``prepare`` may add parameters (a no-op otherwise)
        self.optimizer = optimizer(p for p in model.parameters() if p.requires_grad)
        self.objective = objective
        self.clip_norm = clip_norm
        self._fused = self._fused_step(model) if fused_step else None
        self._host_draws = plan_host_draws(model, self.device, index_transforms_on, fused_step=fused_step)
        # The training steps go through DDP's wrapper (gradients averaged over ranks); evaluation, regularisers'
        # StepContext and checkpoints use the model itself, whose parameters the wrapper shares.
        self._step_model = distributed_model(model, self.device) if self.dist.active else model
        if self.dist.active:
            self._own_random_streams(model)
            if not hasattr(batches, "sharded"):
                raise TypeError(f"{type(batches).__name__} has no sharded(rank, world_size): it cannot train under DDP")
            batches = batches.sharded(self.dist.rank, self.dist.world_size)
        if self.device.type == "cuda" and hasattr(batches, "pinned"):
            batches = batches.pinned()  # host-to-GPU copies of each batch then run asynchronously
        self.batches = batches
        self.scheduler = scheduler(self.optimizer, len(batches)) if scheduler is not None else None
        self._step_lr = 0.0
        self.evaluator = evaluator
        self.epochs = epochs
        self.monitor = monitor
        self.mode = mode
        self.patience = patience
        self.min_epochs = min_epochs
        self.run_dir = Path(run_dir) if run_dir is not None else None
        self._files = RunDirectory(self.run_dir) if self.run_dir is not None else None
        self._writer = self._files if self.dist.is_main else None  # under DDP rank 0 alone writes
        self.val_split = val_split
        self.test_split = test_split
        self.eval_train = eval_train
        self.progress = progress and self.dist.is_main
        self.callbacks = list(callbacks)
        self.step_callbacks = list(step_callbacks)
        self.history: list[dict[str, Any]] = []
        self.step = 0
        self.next_epoch = 0
        self.best_value: float | None = None
        self.best_epoch = -1
        self.evals_since_best = 0
        self.stopped_early = False
        self._best_state: dict[str, torch.Tensor] | None = None

    def _fused_step(self, model: nn.Module) -> Callable[[dict[str, torch.Tensor]], float] | None:
        """The model's fused step for this trainer, after checking that nothing in the loop needs autograd."""
        make = getattr(model, "fused_step", None)
        reasons = [
            (make is None, f"{type(model).__name__} has no fused step (BiasedMF has)"),
            (self.objective is not standard_objective, "an objective other than the standard one"),
            (bool(self.regularizers), "regularisers (their penalties and hooks need autograd)"),
            (self.clip_norm is not None, "gradient clipping (clip_norm)"),
            (self.precision != "fp32", f"precision {self.precision} (the kernel is float32)"),
            (self.device.type != "cpu", f"device {self.device} (the kernel runs on the CPU)"),
            (self.dist.active, "data-parallel training (its sparse gradients cannot be all-reduced)"),
        ]
        refused = [reason for failed, reason in reasons if failed]
        if refused:
            raise ConfigError(f"train.fused_step cannot be used with: {'; '.join(refused)}")
        return make(self.optimizer)  # type: ignore[misc]

    def _own_random_streams(self, model: nn.Module) -> None:
        """Gives this rank random streams of its own: SSE transforms are offset by the rank, and ranks other than
        0 reseed torch's global generators (dropout) with ``rank_seed(torch.initial_seed(), rank)``."""
        for module in model.modules():
            if isinstance(module, IndexTransform):
                module.rank_offset = self.dist.rank
                module.manual_seed(module.seed)  # the stream restarts from seed + rank
        if self.dist.rank > 0:
            seed_everything(rank_seed(torch.initial_seed(), self.dist.rank))

    # ----------------------------------------------------------------------------------------------- training
    def fit(self, *, resume: bool = False) -> FitResult:
        """Trains until ``epochs`` or early stopping; with ``resume`` continues from ``run_dir/last.safetensors``.

        A resumed run that had used up its epochs continues when ``epochs`` is now larger; one that stopped early
        only reports its results again (a run with the larger budget would have stopped at the same epoch). The
        checkpoint must fit: fewer ``epochs`` than it has trained, or a model of another shape, is refused.

        Afterwards the model holds the weights of the best epoch.

        Raises:
            DataError: with ``resume``, the checkpoint is corrupt, fails its checksum or is not an embreg checkpoint;
                it lacks an entry of the training state, or a model or optimizer key of it does not fit (missing,
                unexpected, another shape: :mod:`embreg.runs.state_checks`); or the run directory holds only an old
                pickle ``last.pt`` (never loaded: unpickling can run code), so the run must start afresh.
            ConfigError: with ``resume``, the checkpoint has trained more epochs than ``epochs`` (nothing is
                loaded).
        """
        if resume:
            self._restore()
        bar = progress(
            self.epochs, "epochs", unit="epochs", initial=self.next_epoch, enabled=self.progress, dynamic_ncols=True
        )
        try:
            while not self.stopped_early and self.next_epoch < self.epochs:
                record = self._run_epoch(self.next_epoch)
                self.next_epoch += 1
                self.stopped_early = self._should_stop()
                self._save_last()
                bar.set_postfix({"loss": f"{record['train_loss']:.4f}", self.monitor: f"{record[self.monitor]:.4f}"})
                bar.update(1)
                for callback in self.callbacks:
                    callback(self, record)
        finally:
            bar.close()
        return self._final_result()

    def _run_epoch(self, epoch: int) -> dict[str, Any]:
        self.model.train()
        started = time.perf_counter()
        loss_sum = penalty_sum = 0.0
        n_batches = 0
        steps = progress(
            len(self.batches),
            f"epoch {epoch}",
            unit="steps",
            leave=False,
            enabled=self.progress,
            every=STEP_LINES,
            dynamic_ncols=True,
        )
        for batch in self.batches.epoch(epoch):
            loss, penalty = self._train_step(batch, epoch)
            loss_sum += loss
            penalty_sum += penalty
            n_batches += 1
            steps.update(1)
            if self.step_callbacks:
                self._after_step(epoch, loss)
        steps.close()
        loss_total, penalty_total, batches_total = all_reduce_sums([loss_sum, penalty_sum, n_batches], self.dist)
        self._check_weights_finite(epoch)
        record: dict[str, Any] = {
            "epoch": epoch,
            "train_loss": loss_total / max(batches_total, 1),
            "train_penalty": penalty_total / max(batches_total, 1),
            "seconds": time.perf_counter() - started,
        }
        record.update(self._evaluate(self.val_split))
        if self.eval_train:
            record.update(self._evaluate("train"))
        self.history.append(record)
        self._update_best(record, epoch)
        return record

    def _after_step(self, epoch: int, loss: float) -> None:
        record = {
            "step": self.step,
            "epoch": epoch,
            "train_loss": loss,
            "lr": self._step_lr if self.scheduler is not None else float(self.optimizer.param_groups[0]["lr"]),
        }
        for callback in self.step_callbacks:
            callback(self, record)

    def _train_step(self, batch: dict[str, torch.Tensor], epoch: int) -> tuple[float, float]:
        draws = self._host_draws
        if draws is None:
            return self._step_on_device(move_batch(batch, self.device), epoch)
        batch = move_batch(draws.draw(batch), self.device)
        with draws.passed_through():
            return self._step_on_device(batch, epoch)

    def _step_on_device(self, batch: dict[str, torch.Tensor], epoch: int) -> tuple[float, float]:
        """One optimizer step on a batch already on the training device."""
        if self._fused is not None:
            fused_loss = self._fused(batch)
            if not math.isfinite(fused_loss):
                self._raise_not_finite(fused_loss, fused_loss, 0.0, epoch)
            self._step_scheduler()
            self.step += 1
            return fused_loss, 0.0
        self.optimizer.zero_grad(set_to_none=True)
        ctx = StepContext(model=self.model, batch=batch, step=self.step)
        with autocast(self.device, self.precision):
            loss, output = self._objective(batch)
            ctx.output, ctx.loss = output, loss
            penalty = torch.zeros((), device=loss.device)
            for regularizer in self.regularizers:
                if hasattr(regularizer, "penalty"):
                    penalty = penalty + regularizer.penalty(ctx)
            total = loss + penalty
        # the step's one read-back to the host (on a GPU its one wait), before anything is updated
        total_value, loss_value, penalty_value = torch.stack(
            [v.detach().double() for v in (total, loss, penalty)]
        ).tolist()
        failed = first_failed_rank(math.isfinite(total_value), self.dist)  # under DDP every rank stops together
        if failed is not None:
            self._raise_not_finite(total_value, loss_value, penalty_value, epoch, failed)
        if self._scaler is not None:
            self._scaler.scale(total).backward()
            self._scaler.unscale_(self.optimizer)  # update transforms and clipping see the true gradients
        else:
            total.backward()
        for regularizer in self.regularizers:
            if hasattr(regularizer, "after_backward"):
                regularizer.after_backward(ctx)
        if self.clip_norm is not None:
            nn.utils.clip_grad_norm_(self.model.parameters(), self.clip_norm)
        if self._scaler is not None:
            self._scaler.step(self.optimizer)  # skipped when the gradients overflowed
            self._scaler.update()
        else:
            self.optimizer.step()
        self._step_scheduler()
        self.step += 1
        return loss_value, penalty_value

    def _step_scheduler(self) -> None:
        if self.scheduler is not None:
            self._step_lr = float(self.optimizer.param_groups[0]["lr"])  # the rate this step used, for the loggers
            self.scheduler.step()

    def _last_good_checkpoint(self) -> str:
        """``"; the last good checkpoint is <run_dir>/last.safetensors"`` where that file exists, else ``""``.

        The trainer writes ``last.safetensors`` only after an epoch whose every loss and final weights were finite."""
        last = self.run_dir / LAST_CHECKPOINT if self.run_dir is not None else None
        return f"; the last good checkpoint is {last}" if last is not None and last.is_file() else ""

    def _check_weights_finite(self, epoch: int) -> None:
        """After an epoch's steps: the last update may have made weights non-finite (no later step would see it)."""
        bad = non_finite_parameters(self.model)
        if bad:
            raise TrainingError(
                f"the weights became non-finite in epoch {epoch} (by step {self.step}): {', '.join(bad[:3])}"
                f"{self._last_good_checkpoint()}. {DIVERGENCE_HINT}"
            )

    def _raise_not_finite(self, total: float, loss: float, penalty: float, epoch: int, rank: int = 0) -> None:
        where = f"epoch {epoch}, step {self.step}"
        kept = self._last_good_checkpoint()
        what = f"loss became {total} (task loss {loss}, penalty {penalty})"
        if self.dist.active and rank != self.dist.rank:
            what = f"the loss of rank {rank} became non-finite (this rank's: {total})"
        elif self.dist.active:
            what = f"{what} on rank {rank}"
        raise TrainingError(f"{what} at {where}{kept}. {DIVERGENCE_HINT}")

    def _objective(self, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, Any]:
        try:
            return self.objective(self._step_model, batch)
        except RuntimeError as error:
            if self.dist.active and "finished reduction in the prior iteration" in str(error):
                # DDP names the parameters without a gradient by their index among those that require one
                found = re.search(r"did not receive grad for rank \d+: ([\d ]+)", str(error))
                trainable = [name for name, p in self.model.named_parameters() if p.requires_grad]
                unused = [trainable[int(i)] for i in found.group(1).split()] if found else "(DDP did not say which)"
                raise TrainingError(
                    "under DDP every parameter that requires a gradient must get one in every step; these got none: "
                    f"{unused}. Freeze them (param.requires_grad_(False)) or train in one process."
                ) from error
            raise

    def _evaluate(self, split: str) -> dict[str, float]:
        """The evaluator's metrics on ``split``; under DDP computed once, on rank 0, and broadcast."""
        prefix = metric_prefix(split)
        metrics = None
        if self.dist.is_main:
            metrics = {f"{prefix}_{name}": value for name, value in self.evaluator(self.model, split).items()}
        return broadcast_from_main(metrics, self.dist)

    def _improved(self, value: float) -> bool:
        if math.isnan(value):
            return False
        if self.best_value is None:
            return True
        return value < self.best_value if self.mode == "min" else value > self.best_value

    def _update_best(self, record: dict[str, Any], epoch: int) -> None:
        if self.monitor not in record:
            raise KeyError(f"monitor {self.monitor!r} is not among the evaluated metrics {sorted(record)}")
        value = float(record[self.monitor])
        if self._improved(value):
            self.best_value, self.best_epoch, self.evals_since_best = value, epoch, 0
            self._best_state = copy.deepcopy(self.model.state_dict())
            if self._writer is not None:
                self._writer.save_checkpoint("best", {"model": self.model.state_dict(), "epoch": epoch})
        else:
            self.evals_since_best += 1

    def _should_stop(self) -> bool:
        if self.patience is None or self.next_epoch < self.min_epochs:
            return False
        return self.evals_since_best >= self.patience

    # -------------------------------------------------------------------------------------------- persistence
    def _rank_random_state(self) -> dict[str, Any]:
        """This process's own random streams: torch's global generators and the SSE transforms' generators."""
        state: dict[str, Any] = {
            "torch_rng": torch.get_rng_state(),
            "transforms": {
                name: module.get_extra_state()
                for name, module in self.model.named_modules()
                if isinstance(module, IndexTransform)
            },
        }
        if self.device.type == "cuda":
            state["cuda_rng"] = torch.cuda.get_rng_state(self.device)
        return state

    def _state(self) -> dict[str, Any]:
        """The state ``last.safetensors`` holds (collective under DDP: every rank's random state is gathered)."""
        ranks = gather_to_main(self._rank_random_state(), self.dist) if self.dist.active else None
        state: dict[str, Any] = {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "torch_rng": torch.get_rng_state(),
            "next_epoch": self.next_epoch,
            "step": self.step,
            "best_value": self.best_value,
            "best_epoch": self.best_epoch,
            "evals_since_best": self.evals_since_best,
            "stopped_early": self.stopped_early,
            "history": self.history,
        }
        if self.device.type == "cuda":  # CUDA's generator only where it draws (dropout on the GPU)
            state["cuda_rng"] = torch.cuda.get_rng_state(self.device)
        if self._scaler is not None:
            state["grad_scaler"] = self._scaler.state_dict()
        if self.scheduler is not None:
            state["scheduler"] = self.scheduler.state_dict()
        if ranks is not None:
            state["world_size"] = self.dist.world_size
            state["rank_states"] = ranks
        return state

    def _save_last(self) -> None:
        if self._files is None:
            return
        state = self._state()
        if self._writer is not None:
            self._writer.save_checkpoint("last", state)
            self._writer.write_history(self.history)

    def _restore(self) -> None:
        if self._files is None:
            raise ValueError("resume needs a run_dir to resume from")
        # Checkpoints hold CPU tensors wherever they were written; load_state_dict copies them onto the model's
        # device and the optimizer's onto its parameters', so a run saved on a GPU resumes on the CPU and back.
        state = self._files.load_checkpoint("last", map_location="cpu")
        if state is None:
            return
        check_resume_state(state, self.model, self.optimizer, repr(str(self._files.file(LAST_CHECKPOINT))))
        check_resumable(state, self.epochs, self._files.file(LAST_CHECKPOINT))
        if self.scheduler is not None:  # checked, like the model and optimizer, before anything is loaded
            check_scheduler_state(state.get("scheduler"), self.scheduler, repr(str(self._files.file(LAST_CHECKPOINT))))
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        torch.set_rng_state(state["torch_rng"])
        if "cuda_rng" in state and self.device.type == "cuda":
            torch.cuda.set_rng_state(state["cuda_rng"], self.device)
        if self._scaler is not None and state.get("grad_scaler"):
            self._scaler.load_state_dict(state["grad_scaler"])
        if self.scheduler is not None:
            self.scheduler.load_state_dict(state["scheduler"])
        self.next_epoch = state["next_epoch"]
        self.step = state["step"]
        self.best_value = state["best_value"]
        self.best_epoch = state["best_epoch"]
        self.evals_since_best = state["evals_since_best"]
        self.stopped_early = state["stopped_early"]
        self.history = list(state["history"])
        self._restore_rank_state(state)
        best = self._files.load_checkpoint("best", map_location="cpu")
        if best is not None:
            check_best_state(best, self.model, repr(str(self._files.file(BEST_CHECKPOINT))))
            self._best_state = best["model"]

    def _restore_rank_state(self, state: dict[str, Any]) -> None:
        """Under DDP, this rank's own random streams from the checkpoint's ``rank_states``.

        A checkpoint written with another number of processes holds no state of this rank's shard: its streams
        then continue from the model's saved generators, offset by the rank (see ``IndexTransform``).
        """
        ranks = state.get("rank_states")
        if not self.dist.active or ranks is None or state.get("world_size") != self.dist.world_size:
            return
        own = ranks[self.dist.rank]
        torch.set_rng_state(own["torch_rng"])
        if "cuda_rng" in own and self.device.type == "cuda":
            torch.cuda.set_rng_state(own["cuda_rng"], self.device)
        for name, module in self.model.named_modules():
            if isinstance(module, IndexTransform) and name in own["transforms"]:
                module.set_extra_state(own["transforms"][name])

    def _final_result(self) -> FitResult:
        if self._best_state is not None:
            self.model.load_state_dict(self._best_state)
        metrics: dict[str, float] = {"best_epoch": self.best_epoch, "epochs_run": self.next_epoch}
        metrics.update(self._evaluate(self.val_split))
        if self.test_split is not None:
            metrics.update(self._evaluate(self.test_split))
        if self._writer is not None:
            self._writer.write_metrics(metrics)
        return FitResult(metrics=metrics, history=list(self.history))
