"""A prefetch hint for compiled walks (numba): fetch the cache line of an array row ahead of its use.

The screening walk and the transfer matching touch records all over tables larger than the CPU's
caches, one event after another, and each access waits for memory (about 100 ns) because the next
step depends on it. The rows the next few events will touch are known from the event arrays, so the
walk asks for them a few events early (LLVM's llvm.prefetch): the waits overlap. A hint only: it
changes no result, and an out-of-range index is never read (it is clamped to the array).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic


def _prefetch(typingctx, arr, idx):  # pragma: no cover (compiled inline)
    """Hint: row `idx` of `arr` (its first element) will be read soon. `idx` is clamped to the array."""
    if not isinstance(arr, types.Array) or not isinstance(idx, types.Integer):
        return None
    sig = types.void(arr, idx)

    def codegen(context, builder, signature, args):
        aryty, idxty = signature.args
        ary = context.make_array(aryty)(context, builder, args[0])
        shape = cgutils.unpack_tuple(builder, ary.shape)
        i = context.cast(builder, args[1], idxty, types.intp)
        zero = context.get_constant(types.intp, 0)
        last = builder.sub(shape[0], context.get_constant(types.intp, 1))
        i = builder.select(builder.icmp_signed("<", i, zero), zero, i)
        i = builder.select(builder.icmp_signed(">", i, last), last, i)
        ptr = cgutils.get_item_pointer2(
            context,
            builder,
            data=ary.data,
            shape=shape,
            strides=cgutils.unpack_tuple(builder, ary.strides),
            layout=aryty.layout,
            inds=[i] + [zero] * (aryty.ndim - 1),
            wraparound=False,
            boundscheck=False,
        )
        i32 = ir.IntType(32)
        fn = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(ir.VoidType(), [ptr.type, i32, i32, i32]), "llvm.prefetch.p0"
        )
        builder.call(fn, [ptr, i32(0), i32(3), i32(1)])  # read, keep in all cache levels, data
        return context.get_dummy_value()

    return sig, codegen


# called from compiled code as prefetch(array, index)
prefetch = cast(Callable[[Any, Any], None], intrinsic(_prefetch))
