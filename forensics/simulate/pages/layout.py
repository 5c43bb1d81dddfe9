"""The realistic generator's state as the compiled loop holds it (forensics.simulate.pages.loop): the
columns of each array of int64 it is handed, named once for the loop, its helpers and the driver."""

from __future__ import annotations

CLEAR_US = 50_000  # late landings kept this far from other events on their slots
MAX_NUDGES = 40
EPR0 = 40  # events per request, until the first requests finish

# per request (slot) state: columns of ST
(ROOM, DN, PN, PROMPT, OUT, SENT, FLAGS, KIND, T_A, T_P, T_X, T_R, T_END, T_AB, T_LATE, DP_HEAD,
 DP_PAGES, DO_HEAD, DO_PAGES, PF_HEAD, PF_PAGES, NUDGES, AR_OFF, AR_N, EV, JIT, CLS, EST) = range(28)  # fmt: skip
NF = 28
PH, AB = 1, 2  # FLAGS bits: placeholder, aborted
K_PALLOC, K_LAND, K_READ, K_END, K_ABORT, K_LATE = range(1, 7)  # the slot's pending event
# global scalars: G
(G_HEAP, G_NFREE, G_CI, G_CLEN, G_K, G_NEXT_T, G_LAST_T, G_STOPPED, G_EVENTS, G_ALLEV, G_FIN_EV,
 G_FIN_N, G_ALIVE, G_ARENA, G_T_STOP, G_N503D, G_N503P, G_NAB, G_NPH, G_NUDGE, G_UNCLEAR, G_AMBIG,
 G_D_ALLOCS, G_D_RANGES, G_P_ALLOCS, G_P_RANGES, G_LATE, G_NOW, G_NEARTOP) = range(29)  # fmt: skip
NG = 29
# configuration: CF
(C_PS, C_D, C_P, C_DARK, C_CLEAR, C_DEPTH, C_MAXREQ, C_TARGET, C_ROWG, C_EPR0, C_T_WARM) = range(11)  # fmt: skip
NC = 11
# per node: NS
(NB_BASE, NB_NPG, NB_TOP, NB_AVAIL, NB_FILL, NB_CNT, NB_INFL, NB_LASTT, NB_MAXINFL, NB_USED, NB_MAXUSED,
 NB_AREA, NB_UAREA, NB_AREA_ALL, NB_UAREA_ALL) = range(15)  # fmt: skip
NN = 15
R_CHUNK, R_FLUSH, R_GROW, R_DONE = range(4)
SLOT_BITS = 24
SLOT_MASK = (1 << SLOT_BITS) - 1
NEVER = -(1 << 62)
ARENA_BITS = 20
