-- palloc.m -- the allocator's multi-step protocols under crashes
-- (pool/alloc/palloc.c [alloc and free], palloc.c [open], palloc.c [close], palloc.c [recovery] and palloc.c [exact blocks]; recover.c [dead slots]; proc.c [pool blocks]).
--
-- A root with two children, each a node of two frames. N processes
-- allocate and free single frames (a bit in a child) and whole children (a
-- FULL state in the root), open FREE children (palloc.c [open]: claim the child,
-- link it PART in the root, store OPEN) and close empty ones (palloc.c [close]: claim,
-- unlink to FREE, store IDLE), and split whole children they hold (palloc.c [exact blocks]:
-- claim with content all held, FULL -> PART, store OPEN) to free a frame
-- of them. Any process may crash at any step. Recovery
-- finishes the open/close step of a crashed owner (palloc.c [recovery]: PART -> FREE in
-- the root, then IDLE); it may run beside the others and die and be re-run.
-- Every step below is one CAS or one store of the C code.
--
-- Checked: I1/I2 (an OPEN child hangs under PART; under FREE or FULL a child
-- is not OPEN), and ownership: a frame is allocated in the tree iff some
-- process (live or dead) holds it, and no frame is ever handed to two.
--
-- LIVE_RECOVERY := true models the old liveness test (a recoverer that
-- could take a live owner for dead): rumur then finds an OPEN child under a
-- FREE root -- the state issue 8 reported.

const
  N : 3;
  LIVE_RECOVERY : false;

type
  pid : 1..N;
  owner_t : 0..N;
  kid : 0..1;
  frame : 0..3;
  phase_t : enum { OPEN, IDLE, OPENING, CLOSING };
  cstate_t : enum { CFREE, CPART, CFULL };
  pc_t : enum { READY, OPEN1, OPEN2, CLOSE1, CLOSE2, SPLIT1, SPLIT2, GONE };
  child_t : record
    phase : phase_t;
    owner : owner_t;
    bit : array [0..1] of boolean;
  end;

var
  root : array [kid] of cstate_t;
  child : array [kid] of child_t;
  pc : array [pid] of pc_t;
  tgt : array [pid] of kid;
  alive : array [pid] of boolean;
  holder : array [frame] of owner_t;   -- ghost: who was handed the frame
  rec_pc : array [kid] of 0..1;        -- a recoverer's progress on a child

function allocated(f : frame) : boolean;
var i : kid;
begin
  i := f / 2;
  -- a split in flight (OPENING with content, palloc.c [exact blocks]) still holds its frames
  return root[i] = CFULL |
         (root[i] = CPART & (child[i].phase = OPEN | child[i].phase = OPENING) & child[i].bit[f % 2]);
end;

procedure hand(f : frame; p : pid);
begin
  assert holder[f] = 0 "a frame handed out twice";
  holder[f] := p;
end;

startstate
begin
  for i : kid do
    root[i] := CFREE;
    child[i].phase := IDLE;
    child[i].owner := 0;
    for b : 0..1 do child[i].bit[b] := false; end;
    rec_pc[i] := 0;
  end;
  for p : pid do pc[p] := READY; tgt[p] := 0; alive[p] := true; end;
  for f : frame do holder[f] := 0; end;
end;

ruleset p : pid do

  rule "crash"
    alive[p]
  ==>
    alive[p] := false;
  end;

  -- palloc.c [open]: open a FREE child
  ruleset i : kid do
    rule "open: claim the child"
      alive[p] & pc[p] = READY & child[i].phase = IDLE
    ==>
      -- the claim CAS writes content 0 (what tells an open from a split)
      child[i].phase := OPENING; child[i].owner := p; pc[p] := OPEN1; tgt[p] := i;
      child[i].bit[0] := false; child[i].bit[1] := false;
    end;
  end;

  rule "open: link it PART in the root"
    alive[p] & pc[p] = OPEN1
  ==>
    if root[tgt[p]] = CFREE then
      root[tgt[p]] := CPART; pc[p] := OPEN2;
    else
      child[tgt[p]].phase := IDLE; child[tgt[p]].owner := 0; pc[p] := READY;
    end;
  end;

  rule "open: store OPEN"
    alive[p] & pc[p] = OPEN2
  ==>
    child[tgt[p]].phase := OPEN; child[tgt[p]].owner := 0;
    child[tgt[p]].bit[0] := false; child[tgt[p]].bit[1] := false;
    pc[p] := READY;
  end;

  -- palloc.c [close]: close an empty OPEN child
  ruleset i : kid do
    rule "close: claim the child"
      alive[p] & pc[p] = READY & child[i].phase = OPEN & !child[i].bit[0] & !child[i].bit[1]
    ==>
      child[i].phase := CLOSING; child[i].owner := p; pc[p] := CLOSE1; tgt[p] := i;
    end;
  end;

  rule "close: unlink (PART -> FREE)"
    alive[p] & pc[p] = CLOSE1
  ==>
    if root[tgt[p]] = CPART then root[tgt[p]] := CFREE; end;
    pc[p] := CLOSE2;
  end;

  rule "close: store IDLE"
    alive[p] & pc[p] = CLOSE2
  ==>
    child[tgt[p]].phase := IDLE; child[tgt[p]].owner := 0; pc[p] := READY;
  end;

  -- palloc.c [exact blocks]: split a whole child the process holds, then free one frame of it
  ruleset i : kid do
    rule "split: claim the child, content all held"
      alive[p] & pc[p] = READY & root[i] = CFULL & holder[i * 2] = p & child[i].phase = IDLE
    ==>
      child[i].phase := OPENING; child[i].owner := p; pc[p] := SPLIT1; tgt[p] := i;
      child[i].bit[0] := true; child[i].bit[1] := true;
    end;
  end;

  rule "split: FULL -> PART in the root"
    alive[p] & pc[p] = SPLIT1
  ==>
    if root[tgt[p]] = CFULL then
      root[tgt[p]] := CPART; pc[p] := SPLIT2;
    else
      child[tgt[p]].phase := IDLE; child[tgt[p]].owner := 0; pc[p] := READY;
    end;
  end;

  rule "split: store OPEN"
    alive[p] & pc[p] = SPLIT2
  ==>
    child[tgt[p]].phase := OPEN; child[tgt[p]].owner := 0; pc[p] := READY;
  end;

  -- palloc.c [alloc and free]: one CAS each
  ruleset i : kid; b : 0..1 do
    rule "alloc a frame"
      alive[p] & pc[p] = READY & child[i].phase = OPEN & !child[i].bit[b]
    ==>
      child[i].bit[b] := true; hand(i * 2 + b, p);
    end;

    rule "free a frame"
      alive[p] & pc[p] = READY & holder[i * 2 + b] = p & root[i] != CFULL
    ==>
      -- the CAS checks the child is OPEN with the bit set; it cannot fail here
      assert child[i].phase = OPEN & child[i].bit[b] "a held frame is not allocated in its leaf";
      child[i].bit[b] := false; holder[i * 2 + b] := 0;
    end;
  end;

  ruleset i : kid do
    rule "alloc a whole child"
      alive[p] & pc[p] = READY & root[i] = CFREE
    ==>
      root[i] := CFULL; hand(i * 2, p); hand(i * 2 + 1, p);
    end;

    rule "free a whole child"
      alive[p] & pc[p] = READY & root[i] = CFULL & holder[i * 2] = p
    ==>
      root[i] := CFREE; holder[i * 2] := 0; holder[i * 2 + 1] := 0;
    end;
  end;
end;

-- palloc.c [recovery]: finish a dead owner's step; the recoverer holds the owner's
-- liveness lock (live.c [dead iff free]), so only one works on it; it may die (its
-- progress is lost) and the next starts again.
ruleset i : kid do
  rule "recover: PART -> FREE"
    rec_pc[i] = 0 & (child[i].phase = OPENING | child[i].phase = CLOSING) & child[i].owner != 0 &
    (LIVE_RECOVERY | !alive[child[i].owner]) & !(child[i].bit[0] | child[i].bit[1])
  ==>
    if root[i] = CPART then root[i] := CFREE; end;
    rec_pc[i] := 1;
  end;

  -- a split (OPENING with content): finish it if linked, else undo it
  rule "recover: a split"
    rec_pc[i] = 0 & child[i].phase = OPENING & child[i].owner != 0 &
    (LIVE_RECOVERY | !alive[child[i].owner]) & (child[i].bit[0] | child[i].bit[1])
  ==>
    for p : pid do
      if pc[p] != READY & tgt[p] = i & !alive[p] then pc[p] := GONE; end;
    end;
    if root[i] = CPART then
      child[i].phase := OPEN;
    else
      child[i].phase := IDLE;
    end;
    child[i].owner := 0;
  end;

  rule "recover: store IDLE"
    rec_pc[i] = 1
  ==>
    child[i].phase := IDLE; child[i].owner := 0; rec_pc[i] := 0;
    for p : pid do
      if pc[p] != READY & tgt[p] = i & !alive[p] then pc[p] := GONE; end;
    end;
  end;

  rule "recoverer dies"
    rec_pc[i] = 1
  ==>
    rec_pc[i] := 0;
  end;
end;

invariant "I1: an OPEN child hangs under PART"
  forall i : kid do child[i].phase = OPEN -> root[i] = CPART end;

invariant "I2: under FREE or FULL a child is idle or in a step"
  forall i : kid do root[i] != CPART -> child[i].phase != OPEN end;

invariant "ownership: allocated iff handed out"
  forall f : frame do allocated(f) = (holder[f] != 0) end;
