//! troupe-macros: `#[tool]`, which makes an async function a troupe tool.
//!
//! A proc-macro must live in a crate of its own; `troupe` re-exports it as
//! `troupe::tool`. What it generates is small on purpose: everything a tool
//! does with its function (schema, argument parsing, results) is the
//! runtime's `FnTool`, so a tool written with the attribute and one built
//! with `FnTool::from_fn` behave the same. See the attribute's own docs.

use proc_macro::TokenStream;
use proc_macro2::TokenStream as TokenStream2;
use quote::{quote, quote_spanned};
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{parse_macro_input, Expr, FnArg, ItemFn, Lit, Meta, Token};

/// Makes `async fn NAME(params: P, ctx: &ToolContext) -> R` a tool named
/// `NAME`, at module level; `NAME::tool()` returns it (a `FnTool`, to register with
/// `Arc::new`), and the function stays callable as it was.
///
/// - `P` derives `Deserialize` and `JsonSchema`: the tool's JSON schema is
///   derived from it. The context argument may be left out.
/// - A third argument `state: &S` is the tool's own configuration (a key,
///   a client, settings): then `NAME::tool(state: S)` takes it, and each
///   call borrows it.
/// - The function's doc comment is the description the model reads: the
///   lines of a paragraph are joined with a space, paragraphs with a blank
///   line.
/// - `R` is anything `IntoToolResult` takes: a `String`, `Json(value)`, a
///   `ToolResult`, or a `Result` of one whose error is its `Display` (or a
///   `ToolResult`).
/// - The attribute's arguments are `FnTool`'s builder methods, applied in
///   order: `read_only`, `failure_tolerant`, `pages_own_output`,
///   `deferred`, `offered = in_house` (a `fn(&ToolContext) -> bool`),
///   `timeout = Duration::from_secs(600)`, `gated_by = …`,
///   `alias("new_text", "content")`, `offered_as = spec_for`,
///   `carrying = Held` (a `Carry`). Three more are the macro's own:
///   `name = "other_name"` names the tool differently from the function,
///   `description = EXPR` gives a description built from constants instead
///   of the doc comment's, and `runtime = path` says where troupe's runtime crate is (by default
///   `::troupe::runtime`, or `::troupe_runtime` inside troupe's own crates).
///
/// A bad argument never reaches the function: the dispatcher answers it
/// with the schema's error.
///
/// `troupe` re-exports this attribute as `troupe::tool`; its docs have a
/// worked example, and `examples/tool_from_fn.rs` a runnable one.
#[proc_macro_attribute]
pub fn tool(args: TokenStream, item: TokenStream) -> TokenStream {
    let args = parse_macro_input!(args with Punctuated::<Meta, Token![,]>::parse_terminated);
    let function = parse_macro_input!(item as ItemFn);
    match expand(args, function) {
        Ok(tokens) => tokens.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

fn expand(args: Punctuated<Meta, Token![,]>, function: ItemFn) -> syn::Result<TokenStream2> {
    let sig = &function.sig;
    if sig.asyncness.is_none() {
        return Err(syn::Error::new(
            sig.fn_token.span(),
            "#[tool] takes an `async fn(params: P, ctx: &ToolContext)`: make the function async",
        ));
    }
    let inputs: Vec<&FnArg> = sig.inputs.iter().collect();
    let (params, state) = match inputs.as_slice() {
        [FnArg::Typed(params)] | [FnArg::Typed(params), FnArg::Typed(_)] => (&params.ty, None),
        [FnArg::Typed(params), FnArg::Typed(_), FnArg::Typed(state)] => match &*state.ty {
            syn::Type::Reference(r) if r.mutability.is_none() => (&params.ty, Some(&r.elem)),
            other => {
                return Err(syn::Error::new(
                    other.span(),
                    "a #[tool] function's third argument is its state, borrowed: `state: &S`",
                ))
            }
        },
        _ => {
            return Err(syn::Error::new(
                sig.inputs.span(),
                "#[tool] takes a function of its params and, optionally, the call's context \
                 and the tool's state: `async fn NAME(params: P, ctx: &ToolContext, state: &S)`",
            ))
        }
    };
    let with_context = inputs.len() >= 2;

    let mut name = sig.ident.to_string();
    let mut runtime = default_runtime_path();
    let mut builder = Vec::new();
    let mut described = None;
    for arg in args {
        match arg {
            Meta::NameValue(nv) if nv.path.is_ident("name") => name = string_literal(&nv.value)?,
            Meta::NameValue(nv) if nv.path.is_ident("description") => {
                let value = nv.value;
                described = Some(quote!(#value));
            }
            Meta::NameValue(nv) if nv.path.is_ident("runtime") => {
                runtime = match &nv.value {
                    Expr::Path(path) => quote!(#path),
                    other => {
                        return Err(syn::Error::new(
                            other.span(),
                            "`runtime` is a path, such as `runtime = ::troupe::runtime`",
                        ))
                    }
                }
            }
            Meta::Path(path) => builder.push(quote_spanned!(path.span()=> .#path())),
            Meta::NameValue(nv) => {
                let (path, value) = (&nv.path, &nv.value);
                builder.push(quote_spanned!(path.span()=> .#path(#value)));
            }
            Meta::List(list) => {
                let (path, tokens) = (&list.path, &list.tokens);
                builder.push(quote_spanned!(path.span()=> .#path(#tokens)));
            }
        }
    }
    let doc = description(&function.attrs);
    if doc.is_empty() {
        return Err(syn::Error::new(
            sig.ident.span(),
            "a #[tool] function's doc comment is its description for the model: add one",
        ));
    }
    let description = described.unwrap_or_else(|| quote!(#doc));

    let ident = &sig.ident;
    let vis = &function.vis;
    let inner = inner_visibility(vis);
    let call = if state.is_some() {
        quote!(super::#ident(params, ctx, &self.0))
    } else if with_context {
        quote!(super::#ident(params, ctx))
    } else {
        quote!({
            let _ = ctx;
            super::#ident(params)
        })
    };
    let (handler_struct, state_arg, handler_value) = match state {
        Some(state) => (
            quote!(#[doc(hidden)] #inner struct __Handler(#state);),
            quote!(state: #state),
            quote!(__Handler(state)),
        ),
        None => (
            quote!(#[doc(hidden)] #inner struct __Handler;),
            quote!(),
            quote!(__Handler),
        ),
    };
    let module_doc = format!("The `{name}` tool, made by `#[tool]` from the function `{ident}`.");
    Ok(quote! {
        #function

        #[doc = #module_doc]
        #vis mod #ident {
            #[allow(unused_imports)]
            use super::*;

            #handler_struct

            impl #runtime::tool::func::Handler for __Handler {
                type Params = #params;

                fn call<'a>(
                    &'a self,
                    params: Self::Params,
                    ctx: &'a #runtime::tool::ToolContext,
                ) -> impl ::std::future::Future<Output = #runtime::protocol::ToolResult> + Send + 'a {
                    async move {
                        #runtime::tool::func::IntoToolResult::into_tool_result(#call.await)
                    }
                }
            }

            /// The tool, to register (`Arc::new(…)`) with a runtime or a registry.
            #inner fn tool(#state_arg) -> #runtime::tool::func::FnTool<__Handler> {
                #runtime::tool::func::FnTool::with_handler(#name, #description, #handler_value) #(#builder)*
            }
        }
    })
}

/// The function's visibility, as seen from inside the module generated
/// beside it (one level down), so a private params type stays private.
fn inner_visibility(vis: &syn::Visibility) -> TokenStream2 {
    match vis {
        syn::Visibility::Public(_) => quote!(pub),
        syn::Visibility::Inherited => quote!(pub(super)),
        syn::Visibility::Restricted(r) => {
            let path = &r.path;
            if path.is_ident("crate") || path.segments.first().is_some_and(|s| s.ident == "crate") {
                quote!(#vis)
            } else if path.is_ident("self") {
                quote!(pub(super))
            } else {
                quote!(pub(in super::#path))
            }
        }
    }
}

/// Where the runtime crate is, seen from the crate being compiled: troupe's
/// own crates below the `troupe` package name it directly.
fn default_runtime_path() -> TokenStream2 {
    match std::env::var("CARGO_PKG_NAME").as_deref() {
        Ok("troupe-tools" | "troupe-actors" | "troupe-fuzzing") => quote!(::troupe_runtime),
        _ => quote!(::troupe::runtime),
    }
}

fn string_literal(value: &Expr) -> syn::Result<String> {
    match value {
        Expr::Lit(lit) => match &lit.lit {
            Lit::Str(s) => Ok(s.value()),
            other => Err(syn::Error::new(other.span(), "expected a string")),
        },
        other => Err(syn::Error::new(other.span(), "expected a string")),
    }
}

/// The doc comment as one description: a paragraph's lines joined with a
/// space, paragraphs with a blank line.
fn description(attrs: &[syn::Attribute]) -> String {
    let mut paragraphs: Vec<String> = vec![String::new()];
    for attr in attrs {
        let Meta::NameValue(nv) = &attr.meta else {
            continue;
        };
        if !nv.path.is_ident("doc") {
            continue;
        }
        let Ok(text) = string_literal(&nv.value) else {
            continue;
        };
        for line in text.lines() {
            let line = line.trim();
            match paragraphs.last_mut() {
                Some(p) if line.is_empty() && !p.is_empty() => paragraphs.push(String::new()),
                Some(p) if !line.is_empty() => {
                    if !p.is_empty() {
                        p.push(' ');
                    }
                    p.push_str(line);
                }
                _ => {}
            }
        }
    }
    paragraphs.retain(|p| !p.is_empty());
    paragraphs.join("\n\n")
}
