-- tree.m -- a trim that gives back the allocator's page of leaves of the
-- granules it holds, against openers that read the granule's "no tree" bit
-- before it was set (pool/ledger/resident.c [tree give-back], palloc.c
-- [lazy tree], [tree give-back]; tests/test_elastic.c, "the tree's pages of
-- leaves given back").
--
-- Two granules whose leaves share a page: A, where openers open a node,
-- and B, which only trims and refills take. Each has a residency word (the
-- "no tree" bit, the busy count); the page of tree words is there or not;
-- one word on it (A's node an opener opens: IDLE, OPENING by an opener,
-- OPEN, CLOSING); the parent's state for A's node, which stands for the
-- window (FREE, PART, FULL: held whole by a trimmer or a refill).
-- Every access is one step (sequentially consistent: the code's seq_cst
-- accesses on the two words of the store-load pair; the rest is ordered
-- by its CAS on the same word). A read or a write of the word while the
-- page is not there brings a zeroed page in (IDLE), outside any room claim
-- (counted: `stray`).
--
-- Actors:
--   N openers, each (pa_open): choose the node while the parent says FREE
--     (and may then wait any time: a stale choice); call the hook if the
--     bit is set -- a count there (a trimmer's): give up (1); else count
--     itself busy (one CAS), make the page resident, clear the bit and its
--     count out (one CAS); read the word,
--     give up unless IDLE; claim it (CAS IDLE -> OPENING); look at the bit
--     again: set, give the claim up (a CAS); then at the word: not its
--     claim any more (a trimmer gave the page back after its claim, and the
--     bit was cleared since by a hook or a refill), give up, writing
--     nothing; link (CAS the parent FREE ->
--     PART, else give up: store IDLE); store OPEN; later close it (CLOSING,
--     parent FREE, IDLE).
--   a trimmer, any number of times (elastic.c [trim]): claim the window
--     while the parent says FREE (FULL), mark both granules released with
--     its count; set each bit that is clear where its count is the only
--     one (none set: skip to the count out); see both bits set and its
--     count alone on both, and look at the word: else clear the bits it
--     set and keep the page;
--     else give the page back (gone, the word 0); its counts out; free.
--   a refill (a holder's, or a refill ahead) of B, or of both: claim,
--     populate the page if a bit says so, mark resident (the bits
--     cleared), free.
--
-- Checked in every state:
--   H   no node the bit hides: the parent says PART only while the bit is
--       clear (else walks, the checker and recovery read an open node as
--       IDLE);
--   C   an opener past its second look holds its claim: the word says
--       OPENING by it (a page given back under it erased it);
--   P   a clear bit has the page there (else the next opener writes it in
--       outside any room claim).
--
-- Broken variants (run.sh flips one; each must fail on the property named):
--   NO_RECHECK  the opener does not look at the bit after its claim: its
--               claim is on the page the trimmer gives back next (C);
--   NO_QUIET    the trimmer does not look at the word before the page goes (C);
--   HOOK_IGNORES_BUSY  the hook neither says "held" under a trimmer's count
--                  nor counts itself: it clears the bit under the trimmer (P);
--   HOOK_UNCOUNTED  the hook does not count itself while it populates: a
--                  trim between its populate and its clear gives the page
--                  back, and the word looks the same again when the hook
--                  clears the bit (ABA) (P);
--   ONE_GRANULE_CHECKED  the trimmer looks at the bits and counts of the
--                  granules whose bits it set only: a hook that populated
--                  the page for A (its bit set before) and cleared A's bit
--                  is not seen, and the page goes (P).
--   NO_MINE_AGAIN  the opener trusts a clear bit without looking at its
--                  claim: a hook cleared the bit after the page went (C).

const
  N : 2;
  NO_RECHECK : false;
  NO_QUIET : false;
  HOOK_IGNORES_BUSY : false;
  NO_MINE_AGAIN : false;
  HOOK_UNCOUNTED : false;
  ONE_GRANULE_CHECKED : false;

type
  opid : 1..N;
  who : 0..N;                   -- 0: nobody
  ph_t : enum { W_IDLE, W_OPENING, W_OPEN, W_CLOSING };
  par_t : enum { P_FREE, P_PART, P_FULL };
  opc_t : enum {
    O_IDLE, O_CHOSEN, O_HOOK_POP, O_HOOK_CLR, O_READ, O_CLAIM, O_RECHECK,
    O_BACKOFF, O_LINK, O_GIVEUP, O_STORE, O_HOLD, O_CLOSE_PARENT, O_CLOSE_WORD
  };
  tpc_t : enum { T_IDLE, T_MARKED, T_SET, T_QUIET, T_UNSET, T_PUNCH, T_OUT, T_FREE };
  rpc_t : enum { R_IDLE, R_POP, R_MARK, R_FREE };

var
  bit : boolean;                -- A's residency word: the "no tree" bit
  bitB : boolean;               -- B's
  busyB : 0..1;                 -- B's busy count (a trimmer's)
  busy : 0..N + 1;              -- the busy count: the trimmer's, the hooks'
  hooked : array [opid] of boolean; -- ghost: the opener's hook counted itself
  page : boolean;               -- the page of tree words is there
  ph : ph_t;                    -- the word's phase
  owner : who;                  -- its owner (OPENING, CLOSING)
  par : par_t;                  -- the parent's state for the node
  opc : array [opid] of opc_t;
  tpc : tpc_t;
  rpc : rpc_t;
  stray : 0..8;                 -- pages brought in by a stale access (bounded here)
  tmine : boolean;              -- the trimmer set A's bit itself
  tmineB : boolean;             -- and B's
  rboth : boolean;              -- the refill takes A too

-- an access to the word: a page given back comes back zeroed
procedure touch();
begin
  if !page then
    page := true; ph := W_IDLE; owner := 0;
    if stray < 8 then stray := stray + 1; end;
  end;
end;

startstate
begin
  bit := false; busy := 0; bitB := false; busyB := 0; tmineB := false; rboth := false; page := true; ph := W_IDLE; owner := 0; par := P_FREE;
  for o : opid do opc[o] := O_IDLE; hooked[o] := false; end;
  tpc := T_IDLE; rpc := R_IDLE; stray := 0; tmine := false;
end;

-- ---- openers ----------------------------------------------------------------

ruleset o : opid do
  rule "opener chooses the node (the parent says FREE)"
    opc[o] = O_IDLE & par = P_FREE ==> opc[o] := O_CHOSEN;
  end;

  rule "opener: the hook, or not (a CAS: counted busy)"
    opc[o] = O_CHOSEN ==>
    if !bit then opc[o] := O_READ;
    elsif busy > 0 & !HOOK_IGNORES_BUSY then opc[o] := O_IDLE; -- 1: held
    else
      if !HOOK_UNCOUNTED & !HOOK_IGNORES_BUSY then busy := busy + 1; hooked[o] := true; end;
      opc[o] := O_HOOK_POP;
    end;
  end;

  rule "opener: the hook makes the page resident (room claimed)"
    opc[o] = O_HOOK_POP ==> page := true; opc[o] := O_HOOK_CLR;
  end;

  rule "opener: the hook clears the bit and counts itself out (a CAS)"
    opc[o] = O_HOOK_CLR ==>
    if hooked[o] then
      bit := false; busy := busy - 1; hooked[o] := false; opc[o] := O_READ;
    elsif HOOK_IGNORES_BUSY | busy = 0 then
      bit := false; opc[o] := O_READ;
    else
      opc[o] := O_IDLE; -- (uncounted: a trimmer's count now: held)
    end;
  end;

  rule "opener reads the word"
    opc[o] = O_READ ==>
    touch();
    if ph = W_IDLE then opc[o] := O_CLAIM; else opc[o] := O_IDLE; end;
  end;

  rule "opener claims the word (CAS IDLE -> OPENING)"
    opc[o] = O_CLAIM ==>
    touch();
    if ph = W_IDLE then ph := W_OPENING; owner := o; opc[o] := O_RECHECK;
    else opc[o] := O_IDLE;
    end;
  end;

  rule "opener looks at the bit again, then at its claim"
    opc[o] = O_RECHECK ==>
    if bit & !NO_RECHECK then opc[o] := O_BACKOFF;
    elsif !NO_MINE_AGAIN & (!page | ph != W_OPENING | owner != o) then
      opc[o] := O_IDLE; -- the page went under the claim (and a hook brought it back since): nothing to undo
    else opc[o] := O_LINK;
    end;
  end;

  rule "opener gives its claim up (CAS OPENING(me) -> IDLE)"
    opc[o] = O_BACKOFF ==>
    touch();
    if ph = W_OPENING & owner = o then ph := W_IDLE; owner := 0; end;
    opc[o] := O_IDLE;
  end;

  rule "opener links (CAS the parent FREE -> PART)"
    opc[o] = O_LINK ==>
    if par = P_FREE then par := P_PART; opc[o] := O_STORE; else opc[o] := O_GIVEUP; end;
  end;

  rule "opener gives up (store IDLE)"
    opc[o] = O_GIVEUP ==> touch(); ph := W_IDLE; owner := 0; opc[o] := O_IDLE;
  end;

  rule "opener stores OPEN"
    opc[o] = O_STORE ==> touch(); ph := W_OPEN; owner := 0; opc[o] := O_HOLD;
  end;

  rule "opener closes the empty node (CAS OPEN -> CLOSING)"
    opc[o] = O_HOLD ==>
    touch();
    if ph = W_OPEN then ph := W_CLOSING; owner := o; opc[o] := O_CLOSE_PARENT; else opc[o] := O_IDLE; end;
  end;

  rule "closer: the parent PART -> FREE"
    opc[o] = O_CLOSE_PARENT ==> if par = P_PART then par := P_FREE; end; opc[o] := O_CLOSE_WORD;
  end;

  rule "closer stores IDLE"
    opc[o] = O_CLOSE_WORD ==> touch(); ph := W_IDLE; owner := 0; opc[o] := O_IDLE;
  end;
end;

-- ---- the trimmer --------------------------------------------------------------

rule "trimmer claims the node and marks it released (its count)"
  tpc = T_IDLE & rpc = R_IDLE & par = P_FREE ==>
  par := P_FULL; busy := busy + 1; busyB := 1; tpc := T_MARKED;
end;

rule "trimmer sets the bits (seq_cst CASes: clear, and its count the only one)"
  tpc = T_MARKED ==>
  tmine := !bit & busy = 1; tmineB := !bitB;
  if tmine then bit := true; end;
  if tmineB then bitB := true; end;
  if tmine | tmineB then tpc := T_QUIET; else tpc := T_OUT; end;
end;

rule "trimmer looks at the counts and the word (seq_cst)"
  tpc = T_QUIET ==>
  if ONE_GRANULE_CHECKED & ((tmine & busy != 1) | (tmineB & !bitB)) then tpc := T_UNSET;
  elsif !ONE_GRANULE_CHECKED & !(bit & bitB & busy = 1) then tpc := T_UNSET;
  elsif tmine & ph != W_IDLE & !NO_QUIET then touch(); tpc := T_UNSET;
  else tpc := T_PUNCH;
  end;
end;

rule "trimmer clears the bits it set again (the page stays)"
  tpc = T_UNSET ==>
  if tmine then bit := false; end;
  if tmineB then bitB := false; end;
  tpc := T_OUT;
end;

rule "trimmer gives the page back"
  tpc = T_PUNCH ==> page := false; ph := W_IDLE; owner := 0; tpc := T_OUT;
end;

rule "trimmer counts itself out"
  tpc = T_OUT ==> busy := busy - 1; busyB := 0; tpc := T_FREE;
end;

rule "trimmer frees the node"
  tpc = T_FREE ==> par := P_FREE; tpc := T_IDLE;
end;

-- ---- a refill -----------------------------------------------------------------

ruleset both : boolean do
  rule "refill claims the window (B, or both)"
    rpc = R_IDLE & tpc = T_IDLE & par = P_FREE ==> par := P_FULL; rboth := both; rpc := R_POP;
  end;
end;

rule "refill populates the tree page if a bit says so"
  rpc = R_POP ==> if bitB | (rboth & bit) then page := true; end; rpc := R_MARK;
end;

rule "refill marks resident (the bits cleared)"
  rpc = R_MARK ==> bitB := false; if rboth then bit := false; end; rpc := R_FREE;
end;

rule "refill frees the node"
  rpc = R_FREE ==> par := P_FREE; rpc := R_IDLE;
end;

-- ---- properties -----------------------------------------------------------------

invariant "H: no node the bit hides"
  !(bit & par = P_PART);

invariant "C: an opener past its second look holds its claim"
  forall o : opid do
    (opc[o] = O_LINK | opc[o] = O_STORE | opc[o] = O_GIVEUP) -> (ph = W_OPENING & owner = o)
  end;

invariant "P: a clear bit has the page there"
  (!bit | !bitB) -> page;
