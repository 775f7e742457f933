/* autodiff.h: exports of passes/autodiff/ (autodiff.c): the backward graph.
 * Needs only the IR (ops.def's backward ops and saves). */
#ifndef PTDC_PASS_AUTODIFF_H
#define PTDC_PASS_AUTODIFF_H

#include "ir.h"

/* Append the backward graph after g->nfwd: for every forward node on a path
 * from a parameter to the loss, the nodes that compute its inputs' gradients.
 * Rules (pass_grad_<ID> in autodiff.c): ops.def's backward ops; MATMUL's
 * backward is two MATMULs and MUL's two MULs; ADD's is a REDUCE_SUM per
 * operand (an identity when the operand has the output's dims, a sum over the
 * broadcast dims otherwise); a tensor read by several nodes gets one gradient
 * contribution from each, summed by a chain of ADDs. Gradient tensors have
 * role IR_GRAD and grad_of set (intermediates of MUL's broadcast rule are
 * IR_ACT); the loss's gradient is the seed: an IR_GRAD scalar with no
 * producer, whose value is 1. Backward nodes carry fwd and their forward
 * node's piece, layer and block; tmpl numbers them within their piece.
 * A backward node reads only the forward tensors ops.def's saves mask of its
 * forward node allows (checked: a violation is an internal error).
 * Requires a verified forward-only graph. Returns false after reporting a user
 * error (a statistic such as rstd or lse used as a value by a forward node).
 * `--emit ir-grad` is pass_autodiff, ir_verify(g, "autodiff"), ir_print. */
bool pass_autodiff(IrGraph *g);
/* The gradient of tensor t that t's producer's backward reads (for a
 * parameter: the sum of its contributions), or -1 if t has none. */
int pass_grad_final(const IrGraph *g, int t);
/* Is backward node n one of the ADDs summing contributions to one gradient? */
bool pass_is_grad_sum(const IrGraph *g, const IrNode *n);

#endif
