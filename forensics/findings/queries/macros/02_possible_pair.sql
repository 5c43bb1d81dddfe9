-- The findings' macros, possible_pair: the rule of possible sources (one definition, read by the view possible_sources and by
-- possible_modelled): a source stays possible for a response unless the node's own clock proves it gone:
-- it entered the scheduler after the response's decode finished, or a start-up of the node emptied the
-- pool after its last line and no later than the response's start. An unknown time proves nothing.
-- grain: a macro; reads: nothing; params: none
CREATE OR REPLACE MACRO possible_pair(source_started, source_gone_at, recipient_started, recipient_finished) AS
    NOT coalesce(source_started > recipient_finished, false) AND NOT coalesce(source_gone_at <= recipient_started, false);
