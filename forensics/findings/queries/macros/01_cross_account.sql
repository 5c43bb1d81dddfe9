-- The findings' macros, cross_account (spec section 7): whether a pair's two accounts differ, as text:
-- 'true' (a cross-tenant disclosure), 'false' (the recipient's own account: it may still matter between
-- end users of one account, and is named apart), 'unknown' (either account missing or empty).
-- grain: a macro; reads: nothing; params: none
CREATE OR REPLACE MACRO cross_account(recipient_account, source_account) AS
    CASE WHEN coalesce(recipient_account, '') = '' OR coalesce(source_account, '') = '' THEN 'unknown'
         WHEN recipient_account = source_account THEN 'false' ELSE 'true' END;
