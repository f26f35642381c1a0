"""The cheaper computations of R_approx, R~_approx and xi_approx give the same estimator as the textbook ones."""

import pytest
import torch

from embreg.models import LSTMLanguageModel
from embreg.nn import DropoutSite
from embreg.regularizers.base import StepContext
from embreg.regularizers.dropout import ImplicitDropoutNoise, r_approx, r_tilde_approx, xi_approx_surrogate
from embreg.regularizers.dropout.functional import _categorical, mask_gradients, summed_cross_entropy
from tests.helpers import dropout_tiny as _tiny

LAM = {"h1": 0.7, "h2": 1.3}


def _grads(value, params):
    return torch.autograd.grad(value, params, retain_graph=True)


def _assert_same_value_and_gradients(fast, slow, params):
    """The fast path and its textbook form agree in value and in their gradients with respect to ``params``."""
    torch.testing.assert_close(fast, slow, rtol=1e-12, atol=1e-14)
    for a, b in zip(_grads(fast, params), _grads(slow, params)):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("classes", [2, 3, 7, 12, 37])
def test_categorical_sampler_matches_the_probabilities(classes):
    g = torch.Generator().manual_seed(classes)
    logits = torch.randn(3, classes, generator=g, dtype=torch.float64) * 1.5
    if classes > 2:
        logits[:, 1] = -float("inf")  # a class of probability zero is never drawn
    probs = torch.softmax(logits, -1)
    draws = 20000
    rows = probs.repeat(draws, 1)  # every row an independent draw
    labels = _categorical(rows, torch.Generator().manual_seed(0)).reshape(draws, 3)
    assert labels.min() >= 0 and labels.max() < classes
    for r in range(3):
        freq = torch.bincount(labels[:, r], minlength=classes).double() / draws
        stderr = (probs[r] * (1 - probs[r]) / draws).sqrt()
        assert ((freq - probs[r]).abs() <= 5 * stderr + 1e-12).all(), (freq, probs[r])
        if classes > 2:
            assert freq[1] == 0


def test_r_approx_equals_the_cross_entropy_double_backward_form_for_the_same_labels():
    p = _tiny.params()
    x, _ = _tiny.inputs(n=5)
    h1, h2, logits = _tiny.forward(p, x)
    sites = {"h1": DropoutSite(h1), "h2": DropoutSite(h2)}
    fast = r_approx(logits, sites, LAM, samples=3, generator=torch.Generator().manual_seed(4))
    gen = torch.Generator().manual_seed(4)
    probs = torch.softmax(logits, -1)
    slow = logits.new_zeros(())
    for _ in range(3):
        labels = _categorical(probs, gen)
        loss = summed_cross_entropy(logits, labels)
        for name, grad in zip(LAM, mask_gradients(loss, [sites[n] for n in LAM])):
            slow = slow + LAM[name] * grad.pow(2).sum()
    slow = slow / (3 * logits.shape[0])
    _assert_same_value_and_gradients(fast, slow, list(p.values()))


def test_r_tilde_equals_the_cross_entropy_double_backward_form():
    p = _tiny.params()
    x, y = _tiny.inputs(n=5)
    h1, h2, logits = _tiny.forward(p, x)
    sites = {"h1": DropoutSite(h1), "h2": DropoutSite(h2)}
    fast = r_tilde_approx(logits, y, sites, LAM)
    loss = summed_cross_entropy(logits, y)
    slow = sum(LAM[n] * g.pow(2).sum() for n, g in zip(LAM, mask_gradients(loss, [sites[n] for n in LAM])))
    slow = slow / logits.shape[0]
    _assert_same_value_and_gradients(fast, slow, list(p.values()))


def test_xi_from_the_logit_gradient_equals_xi_from_the_loss():
    p = _tiny.params()
    x, y = _tiny.inputs(n=5)
    h1, h2, logits = _tiny.forward(p, x)
    sites = {"h1": DropoutSite(h1), "h2": DropoutSite(h2)}
    loss = torch.nn.functional.cross_entropy(logits, y)
    slow = xi_approx_surrogate(loss, sites, LAM, generator=torch.Generator().manual_seed(2))
    dlogits = (torch.softmax(logits, -1) - torch.nn.functional.one_hot(y, logits.shape[-1])) / logits.shape[0]
    fast = xi_approx_surrogate(
        loss, sites, LAM, generator=torch.Generator().manual_seed(2), logits=logits, logits_grad=dlogits
    )
    assert fast.item() == 0.0
    params = list(p.values())
    for a, b in zip(_grads(fast, params), _grads(slow, params)):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


def test_the_lm_noise_takes_the_logit_path_and_matches_the_loss_path():
    torch.manual_seed(0)
    model = LSTMLanguageModel.build(vocab_size=30, emb_dim=8, hidden_dim=8, layers=1).double()
    g = torch.Generator().manual_seed(3)
    batch = {"input": torch.randint(0, 30, (3, 6), generator=g), "target": torch.randint(0, 30, (3, 6), generator=g)}
    noise = ImplicitDropoutNoise(0.8)
    params = [q for q in model.parameters() if q.requires_grad]

    def gradient(fast: bool):
        out = model(batch)
        loss = model.loss(batch, out)
        torch.manual_seed(11)  # the same eta
        if fast:
            value = noise.penalty(StepContext(model, batch, out, loss))
        else:
            sites = {n: s.with_structure("element") for n, s in model.dropout_sites(batch, out).items()}
            value = xi_approx_surrogate(loss, sites, {n: 0.8 for n in sites})
        return torch.autograd.grad(value, params, allow_unused=True)

    for a, b in zip(gradient(True), gradient(False)):
        if a is None or b is None:
            assert a is None and b is None
        else:
            torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-12)


def test_logit_path_needs_both_arguments():
    h = torch.randn(4, 3, requires_grad=True)
    logits = h @ torch.randn(3, 5)
    with pytest.raises(Exception, match="both logits and logits_grad"):
        xi_approx_surrogate(logits.sum(), {"h": DropoutSite(h)}, {"h": 1.0}, logits=logits)


def test_unrolled_lstm_equals_nn_lstm_in_value_and_first_and_second_derivatives():
    from embreg.models.lstm_lm import unrolled_lstm

    torch.manual_seed(0)
    lstm = torch.nn.LSTM(3, 4, batch_first=True).double()
    x = torch.randn(2, 5, 3, dtype=torch.float64, requires_grad=True)
    state = (torch.randn(1, 2, 4, dtype=torch.float64), torch.randn(1, 2, 4, dtype=torch.float64))
    ref_out, (ref_h, ref_c) = lstm(x, state)
    out, (h, c) = unrolled_lstm(x, state, lstm.weight_ih_l0, lstm.weight_hh_l0, lstm.bias_ih_l0, lstm.bias_hh_l0)
    torch.testing.assert_close(out, ref_out)
    torch.testing.assert_close(h, ref_h)
    torch.testing.assert_close(c, ref_c)
    weights = (lstm.weight_ih_l0, lstm.weight_hh_l0, lstm.bias_ih_l0, lstm.bias_hh_l0)
    h0, c0 = (s.clone().requires_grad_() for s in state)

    def everything(xx, hh, cc, *w):  # outputs and final states, as functions of inputs, initial state and weights
        out, (h_last, c_last) = unrolled_lstm(xx, (hh, cc), *w)
        return torch.cat([out.reshape(-1), h_last.reshape(-1), c_last.reshape(-1)])

    assert torch.autograd.gradcheck(everything, (x, h0, c0, *weights))
    assert torch.autograd.gradgradcheck(everything, (x, h0, c0, *weights))


def test_r_approx_and_xi_give_the_same_gradients_with_the_unrolled_lstm():
    from embreg.regularizers.dropout import algorithm2

    g = torch.Generator().manual_seed(3)
    batch = {"input": torch.randint(0, 30, (3, 6), generator=g), "target": torch.randint(0, 30, (3, 6), generator=g)}
    grads = []
    for unroll in (False, True):
        torch.manual_seed(0)
        model = LSTMLanguageModel.build(vocab_size=30, emb_dim=8, hidden_dim=8, layers=2, unroll=unroll).double()
        params = [q for q in model.parameters() if q.requires_grad]
        out = model(batch)
        loss = model.loss(batch, out)
        ctx = StepContext(model, batch, out, loss)
        torch.manual_seed(5)  # the same sampled labels and signs
        total = loss + sum(r.penalty(ctx) for r in algorithm2(0.4).regularizers)
        grads.append(torch.autograd.grad(total, params, allow_unused=True))
    for a, b in zip(*grads):
        if a is None or b is None:
            assert a is None and b is None
        else:
            torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-12)


def _graph_node_names(root) -> list[str]:
    seen, stack, names = set(), [root], []
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        names.append(type(node).__name__)
        stack.extend(next_node for next_node, _ in node.next_functions)
    return names


def test_unrolled_lstm_is_one_node_with_one_batched_weight_gradient():
    """The recurrence is one autograd node, and the hidden-to-hidden weight gradient (also in a create-graph
    backward, where the analytic regularisers differentiate it again) is one matrix product over all time steps,
    not one per step; no per-step slice of a whole-sequence tensor (whose backward allocates and sums a zero tensor
    of the sequence every step)."""
    from embreg.models.lstm_lm import unrolled_lstm

    lstm = torch.nn.LSTM(3, 4, batch_first=True)
    x = torch.randn(2, 7, 3, requires_grad=True)
    out, _ = unrolled_lstm(
        x,
        (torch.zeros(1, 2, 4), torch.zeros(1, 2, 4)),
        lstm.weight_ih_l0,
        lstm.weight_hh_l0,
        lstm.bias_ih_l0,
        lstm.bias_hh_l0,
    )
    assert _graph_node_names(out.grad_fn).count("_LSTMSequenceBackward") == 1
    (grad_w_hh,) = torch.autograd.grad(out.pow(2).sum(), lstm.weight_hh_l0, create_graph=True)
    assert type(grad_w_hh.grad_fn).__name__ == "MmBackward0"
    names = _graph_node_names(grad_w_hh.grad_fn)
    assert "SelectBackward0" not in names and names.count("SliceBackward0") <= 1
